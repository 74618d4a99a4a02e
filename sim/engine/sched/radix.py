"""Prefix reuse (SGLang RadixAttention-style) on top of chunked or continuous batching.

A new request's prompt, as a chain of block keys, is matched against the replica's radix tree;
matched blocks are shared (ref-counted, the node locked) and only the rest is prefilled, which
"raises tokens computed". When its prompt is in the cache the request's full prompt blocks are
inserted. Unlocked cached blocks are evicted LRU (simulated time) when blocks run short.
Ordering `lpm` admits the waiting request with the longest cached prefix first.

Hybrid models (full attention + sliding-window or chunked-local layers kept outside the pool) hit
only as far as their windowed layers can serve too, by vLLM's hybrid KV cache manager rules
(sim/engine/kv/window_cache.py); models without such layers skip that check entirely.
"""

from __future__ import annotations

import numpy as np

from sim.engine.kv.keys import block_keys
from sim.engine.kv.radix import RadixCache
from sim.engine.kv.window_cache import WindowCompanions
from sim.engine.sched.chunked import ChunkedScheduler
from sim.engine.sched.continuous import ContinuousScheduler
from sim.engine.sched.host_loads import make_host_loads
from sim.inputs.model.kv import pooled_layers, window_blocks_per_seq, window_layers

LPM_SCAN_LIMIT = 128  # waiting requests examined per step for longest-prefix-first ordering
_NO_KEYS = np.empty(0, dtype=np.int64)
_NO_KEYS.flags.writeable = False


class RadixMixin:
    """Hooks of `Scheduler` that add a radix prefix cache."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.radix = RadixCache(self.blocks)
        self.uses_waiting_order = self.cfg.radix_ordering == "lpm"
        self._keys: dict[int, np.ndarray] = {}
        self._locks: dict[int, object] = {}
        self.host_loads = make_host_loads(self)  # hook: host-memory prefix tier (None when off)
        self.window = _window_companions(self)  # hybrid attention only (None otherwise)
        if self.window is not None:
            self.radix.on_drop_blocks = self.window.forget

    def keys_of(self, rid: int) -> np.ndarray:
        """The request's prompt as block keys (none when the workload has no prefix ids)."""
        trace = self.table.trace
        if not trace.has_hash_ids:
            return _NO_KEYS
        keys = self._keys.get(rid)
        if keys is None:
            keys = block_keys(trace.hash_ids(int(self.table.sample_of[rid])), trace.hash_block_tokens,
                              int(self.table.prompt_tokens[rid]), self.blocks.block_size)
            self._keys[rid] = keys
        return keys

    def schedule(self, now_s: float, horizon_s: float):
        if self.uses_waiting_order and len(self.waiting) > 1:
            self._order_longest_prefix_first(now_s)
        return super().schedule(now_s, horizon_s)

    def _order_longest_prefix_first(self, now_s: float) -> None:
        head = [self.waiting.popleft() for _ in range(min(LPM_SCAN_LIMIT, len(self.waiting)))]
        matched = [self.radix.cached_prefix_blocks(self.keys_of(r)) for r in head]
        order = sorted(range(len(head)), key=lambda i: (-matched[i], i))  # stable: FCFS among equals
        self.waiting.extendleft(head[i] for i in reversed(order))

    # -------------------------------------------------------------- hooks
    def on_admit(self, rid: int, now_s: float) -> None:
        t = self.table
        keys = self.keys_of(rid)
        if not keys.size or self.blocks.table(rid):
            return
        match = self.radix.match_prefix(keys, now_s)
        n_max = int(t.n_tokens[rid] - 1) // self.blocks.block_size  # compute >= 1 token
        usable = min(match.n_blocks, n_max)
        if self.window is not None and usable > 0:
            usable = self.window.hit_blocks(match.blocks, usable)
            self.window.hold(rid, self.window.needed_blocks(match.blocks, usable))
        if usable > 0:
            self.blocks.attach_shared(rid, match.blocks[:usable])
            self.radix.lock(match.node)
            self._locks[rid] = match.node
        n_host = 0
        if self.host_loads is not None and usable == match.n_blocks:  # hook: continue into the host tier
            n_host = self.host_loads.extend(rid, usable, n_max)
        if usable + n_host <= 0:
            return
        t.n_computed[rid] = (usable + n_host) * self.blocks.block_size
        if np.isnan(t.scheduled_s[rid]):
            t.cached_tokens[rid] = (usable + n_host) * self.blocks.block_size
            t.host_cached_tokens[rid] = n_host * self.blocks.block_size

    def on_admit_failed(self, rid: int) -> None:
        self._unlock(rid)
        if self.window is not None:
            self.window.release(rid)
        self.blocks.free_request(rid)
        self.table.n_computed[rid] = 0
        self.table.cached_tokens[rid] = 0
        self.table.host_cached_tokens[rid] = 0
        if self.host_loads is not None:
            self.host_loads.undo(rid)

    def single_step(self, ids, new_tokens, transfer_s: float = 0.0, n_decoding: int = 0):
        if self.host_loads is not None:  # hook: host-tier loads of the requests admitted in this step
            transfer_s += self.host_loads.take_pending_s(ids)
        return super().single_step(ids, new_tokens, transfer_s, n_decoding)

    def on_prefill_done(self, rid: int, now_s: float) -> None:
        keys = self.keys_of(rid)
        if not keys.size:
            return
        table = self.blocks.table(rid)
        if self.host_loads is not None:
            self.host_loads.forget(rid)
        self.radix.insert(keys, table[: keys.shape[0]], now_s)
        match = self.radix.match_prefix(keys, now_s)
        node = match.node
        if self.window is not None:
            self.window.prompt_computed(rid, match.blocks, int(self.table.n_computed[rid]))
        self._unlock(rid)
        self.radix.lock(node)
        self._locks[rid] = node

    def on_release(self, rid: int) -> None:
        self._unlock(rid)
        if self.window is not None:
            self.window.release(rid)

    def make_room(self, n_blocks: int, use_watermark: bool = False) -> bool:
        if self.blocks.can_allocate(n_blocks, use_watermark):
            return True
        reserve = self.blocks.watermark_blocks if use_watermark else 0
        self.radix.evict(n_blocks + reserve - self.blocks.n_free)
        return self.blocks.can_allocate(n_blocks, use_watermark)

    def n_request_blocks(self) -> int:
        """Cached blocks no running request uses are cache, not fragmentation."""
        return self.blocks.n_used - self.radix.n_evictable_blocks

    def _unlock(self, rid: int) -> None:
        node = self._locks.pop(rid, None)
        if node is not None:
            self.radix.unlock(node)


def _window_companions(sched) -> WindowCompanions | None:
    """The windowed layers' prefix-cache state of a hybrid model; None when every layer is full
    attention or every layer is windowed (then they are pooled: sim/inputs/model/kv.py)."""
    model = sched.cost.model
    if getattr(model, "layer_attention", None) is None or not window_layers(model):
        return None
    kinds = {k for k in model.layer_attention if k != "full"}
    if len(kinds) != 1:
        raise ValueError(f"{model.name}: one windowed attention kind is modelled, got {sorted(kinds)}")
    block_size = sched.blocks.block_size
    reserve = min(sched.cfg.max_num_seqs * window_blocks_per_seq(model, block_size), sched.blocks.n_blocks)
    ratio = window_layers(model) / pooled_layers(model)  # windowed bytes per block / pooled bytes per block
    return WindowCompanions(kinds.pop(), model.window_tokens, block_size, reserve, sched.blocks, ratio)


class RadixChunkedScheduler(RadixMixin, ChunkedScheduler):
    pass


class RadixContinuousScheduler(RadixMixin, ContinuousScheduler):
    pass
