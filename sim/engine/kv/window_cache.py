"""Prefix-cache reuse for hybrid models (full attention + sliding-window or chunked-local layers),
by the rules of vLLM's hybrid KV cache manager.

vLLM (v1/core/kv_cache_coordinator.py, HybridKVCacheCoordinator.find_longest_cache_hit; read at
vllm-project/vllm commit 52b9a57da84e0b9e3ee807f1fcbe5f5a2aec853f) finds a hit in every KV cache
group and takes the longest prefix every group can serve: the full-attention group's longest
cached prefix first, then the windowed group with that length as its bound (one pass when there
is one full and one other group). The windowed groups (v1/core/single_type_kv_cache_manager.py,
SlidingWindowManager / ChunkedLocalAttentionManager; read at ROCm/vllm commit 55970f184d73):
- sliding window W, block B: a hit of L blocks needs only the ceil((W - 1) / B) blocks before L
  (earlier ones are skipped); the search runs from the bound leftwards and stops at the first such
  run, else the hit is the run of cached blocks from block 0 (a prefix shorter than the window);
- chunked-local, chunk C: blocks before the chunk that the bound falls in are skipped; the hit is
  that chunk's start plus the cached blocks from there on (a hit at a chunk boundary needs none).
Blocks that leave the window are freed as the sequence computes (remove_skipped_blocks) but stay
cached until the block pool reuses them; a finished sequence frees its window's blocks.

Here the full-attention blocks live in the block pool and radix tree; a windowed layer block is
a "companion" of the full-attention block at the same position, named by that block's id. The
windowed layers have their own reserve (sim/inputs/layout/memory.py, `reserve_blocks` companions): running
sequences hold their window there, and freed-but-cached companions fill its idle part. Beyond it,
freed companions stay cached in the pool's FREE memory (`pool_blocks_per_companion` pool blocks
each: the windowed layers' bytes per block over the pooled layers'), as vLLM's one pool keeps
them, and are the first cache to go when the pool uses that memory, oldest first: vLLM's free
queue is FIFO, and a window block leaves the window, hence is freed, before the full-attention
blocks of its sequence (freed when it ends). The pool is not charged for them (free memory it can
take back at once); they are dropped as soon as its free blocks no longer cover them (checked
whenever companions change and before every hit). Simplification, stated: a sequence's companions
are placed when its prompt is computed (the prompt's companions outside the final window freed
then, oldest position first) and the rest freed when it leaves; vLLM frees them one by one as the
window passes.
"""

from __future__ import annotations

import math
from collections import OrderedDict


class WindowCompanions:
    """Which windowed-layer blocks are cached, keyed by the full-attention block at their position."""

    def __init__(self, kind: str, window_tokens: int, block_size: int, reserve_blocks: int, pool=None,
                 pool_blocks_per_companion: float = 0.0):
        """`pool`: the BlockManager whose free blocks freed companions may borrow (None: they fit
        in the reserve or are dropped)."""
        if kind not in ("sliding", "chunked"):
            raise ValueError(f"windowed attention kind {kind!r}")
        self.kind, self.window_tokens, self.block_size = kind, window_tokens, block_size
        self.reserve_blocks = reserve_blocks
        self.pool, self.ratio = pool, pool_blocks_per_companion
        self.n_needed = math.ceil((window_tokens - 1) / block_size)  # sliding: blocks a hit needs
        self._ref: dict[int, int] = {}  # held companion -> holders
        self._free: OrderedDict[int, None] = OrderedDict()  # cached, unheld, oldest first
        self._held_by: dict[int, list[int]] = {}
        self.n_dropped = 0

    def is_cached(self, block: int) -> bool:
        return block in self._ref or block in self._free

    # ------------------------------------------------------------------ the hit rule
    def hit_blocks(self, path_blocks: list[int], n_bound: int) -> int:
        """Blocks of the longest prefix (at most `n_bound` of `path_blocks`, the full-attention
        group's cached blocks) the windowed layers can also serve. Mutates only to drop the
        freed companions the pool's free memory no longer covers."""
        if n_bound <= 0:
            return 0
        self._trim()  # the pool may have taken back the free memory companions sat in
        if self.kind == "chunked":
            chunk = self.window_tokens
            start = (n_bound * self.block_size) // chunk * chunk // self.block_size
            n = start
            while n < n_bound and self.is_cached(path_blocks[n]):
                n += 1
            return n
        run = 0
        for i in range(n_bound - 1, -1, -1):
            if self.is_cached(path_blocks[i]):
                run += 1
                if run >= self.n_needed:
                    return i + run
            else:
                run = 0
        return run  # the cached run from block 0: a prefix shorter than the window

    def needed_blocks(self, path_blocks: list[int], n_hit: int) -> list[int]:
        """The companions a hit of `n_hit` blocks uses (the others are skipped)."""
        return [b for b in path_blocks[self._first_kept(n_hit * self.block_size):n_hit] if self.is_cached(b)]

    # ------------------------------------------------------------------ lifecycle
    def hold(self, rid: int, blocks: list[int]) -> None:
        """`rid` holds these companions (a hit, or its own newly computed ones)."""
        held = self._held_by.setdefault(rid, [])
        for b in blocks:
            self._free.pop(b, None)
            self._ref[b] = self._ref.get(b, 0) + 1
            held.append(b)
        self._trim()

    def prompt_computed(self, rid: int, path_blocks: list[int], n_tokens: int) -> None:
        """`rid` computed its prompt (`n_tokens`, whose full blocks are `path_blocks` in the tree):
        its companions outside the window are freed (oldest position first), the rest held."""
        first_kept = min(self._first_kept(n_tokens), len(path_blocks))
        held_now = set(self._held_by.get(rid, ()))
        self.hold(rid, [b for b in path_blocks if b not in held_now])
        self._unhold(rid, set(path_blocks[:first_kept]))

    def release(self, rid: int) -> None:
        """`rid` left: its companions are freed, the tail first (vLLM frees in reverse)."""
        self._unhold(rid, None)

    def forget(self, blocks) -> None:
        """The full-attention blocks were evicted: their companions can serve no hit."""
        for b in blocks:
            self._free.pop(b, None)

    # ------------------------------------------------------------------ internals
    def _first_kept(self, n_tokens: int) -> int:
        """First block position the window of a sequence at `n_tokens` still needs."""
        if self.kind == "chunked":
            return n_tokens // self.window_tokens * self.window_tokens // self.block_size
        return max(0, n_tokens - self.window_tokens + 1) // self.block_size

    def _unhold(self, rid: int, which: set | None) -> None:
        """Free `rid`'s companions in `which` (slid out of the window: in position order, the
        oldest first), or all of them (`None`: it left; the tail first, as vLLM frees)."""
        held = self._held_by.get(rid, [])
        order = held if which is not None else reversed(held)
        keep = []
        for b in order:
            if which is not None and b not in which:
                keep.append(b)
                continue
            n = self._ref[b] - 1
            if n:
                self._ref[b] = n
            else:
                del self._ref[b]
                self._free[b] = None
        if keep:
            self._held_by[rid] = keep
        else:
            self._held_by.pop(rid, None)
        self._trim()

    def _trim(self) -> None:
        """Drop the oldest freed companions that neither the reserve's idle part nor the pool's
        free blocks cover."""
        while self._free and not self._covered():
            self._free.popitem(last=False)
            self.n_dropped += 1

    def _covered(self) -> bool:
        borrowed = len(self._free) - max(0, self.reserve_blocks - len(self._ref))
        if borrowed <= 0:
            return True
        return self.pool is not None and self.ratio > 0 and borrowed * self.ratio <= self.pool.n_free
