"""Scheduler glue of the host-memory prefix tier (sim/engine/kv/host_tier.py) for the radix policy.

The radix tree's eviction hook stores evicted blocks in the tier. At admission, a prompt whose
GPU match ends where its chain continues into the tier loads those blocks: new GPU blocks are
taken now, their tokens count as computed, and the copy's host-link time (the per-GPU shard of
each block over `host_link_gb_s`, like a swap-in) is added to the transfer time at the start
of the step that admits the request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from sim.engine.kv.host_tier import HostTier, chain_hashes
from sim.inputs.hardware import GIB

if TYPE_CHECKING:
    from sim.engine.sched.base import Scheduler


class HostLoads:
    def __init__(self, sched: Scheduler, capacity_blocks: int, s_per_block: float):
        self.sched, self.s_per_block = sched, s_per_block
        self.tier = HostTier(capacity_blocks)
        self._chains: dict[int, np.ndarray] = {}
        self._pending_blocks: dict[int, int] = {}  # loads of requests admitted but not yet in a step
        sched.radix.on_evict = self._on_evict

    def _on_evict(self, path_keys: np.ndarray, n_tail: int) -> None:
        self.tier.store(chain_hashes(path_keys)[-n_tail:])

    def _chain(self, rid: int) -> np.ndarray:
        chain = self._chains.get(rid)
        if chain is None:
            chain = self._chains[rid] = chain_hashes(self.sched.keys_of(rid))
        return chain

    def extend(self, rid: int, n_gpu_blocks: int, n_max_blocks: int) -> int:
        """Load the blocks after the GPU match that the tier holds (up to n_max_blocks in all);
        grows the request's table by them. Returns how many were loaded (0 if room is short)."""
        if n_gpu_blocks >= n_max_blocks:
            return 0
        hashes = self._chain(rid)[n_gpu_blocks:n_max_blocks]
        n_hits = self.tier.leading_hits(hashes)
        if n_hits == 0:
            return 0
        hits = hashes[:n_hits]
        self.tier.load(hits)  # most recent first, so making room below cannot push them out
        if not self.sched.make_room(n_hits):
            self.tier.n_loaded -= n_hits
            return 0
        self.sched.blocks.grow(rid, (n_gpu_blocks + n_hits) * self.sched.blocks.block_size)
        self._pending_blocks[rid] = n_hits
        return n_hits

    def undo(self, rid: int) -> None:
        """The admission failed: nothing was loaded after all."""
        self.tier.n_loaded -= self._pending_blocks.pop(rid, 0)

    def take_pending_s(self, ids) -> float:
        """Host-link seconds of the loads of these (just admitted) requests; forgets them."""
        if not self._pending_blocks:
            return 0.0
        return sum(self._pending_blocks.pop(r, 0) for r in ids) * self.s_per_block

    def forget(self, rid: int) -> None:
        self._chains.pop(rid, None)


def make_host_loads(sched: Scheduler) -> HostLoads | None:
    """The tier of a radix scheduler when `cpu_cache_gib` > 0 (per GPU, like swap_space)."""
    if not sched.cfg.cpu_cache_gib:
        return None
    bytes_per_block = sched.blocks.block_size * sched.cost.kv_bytes_per_token_layer_gpu * sched.cost.model.n_layers
    capacity = int(sched.cfg.cpu_cache_gib * GIB // bytes_per_block)
    return HostLoads(sched, capacity, bytes_per_block / sched.cost.hw.host_link_bytes_s)
