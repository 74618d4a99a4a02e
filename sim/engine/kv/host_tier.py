"""Host-memory tier of the radix prefix cache (a second level, like SGLang's HiCache or LMCache
on CPU): blocks the GPU radix tree evicts are kept in host memory, least recently used first out;
a later prompt whose prefix continues into this tier loads those blocks over the host link
instead of recomputing them.

Entries are keyed by a hash of the whole prefix chain ending at the block (block keys alone do
not encode their position). The chain hash is polynomial, h_i = h_{i-1} * P + mix(key_i) mod
2**64, computed for a whole chain at once from prefix sums; two different chains share a hash
only by a 64-bit accident. Capacity counts blocks of one GPU's KV shard (like `swap_space`).
Only content is modelled: no host block ids; a hit copies, the entry stays (and is refreshed).
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

_P = np.uint64(0x100000001B3)  # odd, so invertible mod 2**64
_P_INV = np.uint64(pow(int(_P), -1, 2**64))
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)


def chain_hashes(keys: np.ndarray) -> np.ndarray:
    """uint64 hash of every prefix keys[:i+1] of a chain of block keys."""
    n = keys.shape[0]
    if n == 0:
        return np.empty(0, dtype=np.uint64)
    x = keys.astype(np.int64).view(np.uint64)
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * _MIX_1
        x = (x ^ (x >> np.uint64(27))) * _MIX_2
        x = x ^ (x >> np.uint64(31))
        powers = np.concatenate([np.ones(1, dtype=np.uint64), np.cumprod(np.full(n - 1, _P, dtype=np.uint64))])
        inverse = np.concatenate([np.ones(1, dtype=np.uint64), np.cumprod(np.full(n - 1, _P_INV, dtype=np.uint64))])
        return powers * np.cumsum(x * inverse, dtype=np.uint64)


class HostTier:
    """LRU of evicted prefix blocks in host memory, `capacity_blocks` blocks."""

    def __init__(self, capacity_blocks: int):
        self.capacity_blocks = capacity_blocks
        self._lru: OrderedDict[int, None] = OrderedDict()
        self.n_stored = 0  # blocks written to the tier (evicted from the GPU tree)
        self.n_dropped = 0  # blocks pushed out of the tier by LRU
        self.n_loaded = 0  # blocks loaded back to the GPU on a hit

    def __len__(self) -> int:
        return len(self._lru)

    def store(self, hashes: np.ndarray) -> None:
        """Keep these chain hashes (most recent last); drop the least recently used beyond capacity."""
        lru = self._lru
        for h in hashes.tolist():
            if h in lru:
                lru.move_to_end(h)
            else:
                lru[h] = None
                self.n_stored += 1
        while len(lru) > self.capacity_blocks:
            lru.popitem(last=False)
            self.n_dropped += 1

    def leading_hits(self, hashes: np.ndarray) -> int:
        """How many leading chain hashes the tier holds (read-only)."""
        lru = self._lru
        n = 0
        for h in hashes.tolist():
            if h not in lru:
                break
            n += 1
        return n

    def load(self, hashes: np.ndarray) -> None:
        """A hit: these blocks go to the GPU; their entries stay and become most recent."""
        for h in hashes.tolist():
            self._lru.move_to_end(h)
        self.n_loaded += int(hashes.shape[0])

    def stats(self) -> dict:
        return {"capacity_blocks": self.capacity_blocks, "stored_blocks": self.n_stored,
                "dropped_blocks": self.n_dropped, "loaded_blocks": self.n_loaded, "held_blocks": len(self._lru)}
