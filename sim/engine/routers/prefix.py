"""Prefix-affinity routing: send a request where its prompt prefix is cached, with a load guard."""

from __future__ import annotations

import numpy as np

from sim.engine.routers.simple import Router

LOAD_GUARD_RATIO = 1.5  # a replica may take a prefix hit while its load <= ratio * mean load + 1
MIN_GAIN_SHARE = 0.5  # follow a prefix only when it saves this share of the prompt over the least loaded


class PrefixAffinityRouter(Router):
    """The replica whose radix cache holds the longest prefix of the prompt, when that prefix is
    worth it, else the least loaded replica (fewest outstanding requests, ties to the lowest index).

    Worth it: the best replica caches at least MIN_GAIN_SHARE of the prompt's blocks more than the
    least loaded one does. A prefix every replica holds (a shared system prompt) gains nothing, so
    it cannot pull all traffic to the first replica that cached it, and a replica whose cache is
    still cold keeps getting new conversations. Load guard: a replica whose load exceeds
    LOAD_GUARD_RATIO x the mean load + 1 takes no prefix-driven request, so one hot prefix cannot
    swamp it. Looking does not count as use: the peek leaves the caches' LRU times unchanged.
    """

    def pick(self, rid, replicas, now_s) -> int:
        loads = np.array([r.sched.n_outstanding() for r in replicas], dtype=np.float64)
        least_loaded = int(np.argmin(loads))
        matched = [_cached_blocks(replica.sched, rid) for replica in replicas]
        n_prompt_blocks = _prompt_blocks(replicas[least_loaded].sched, rid)
        if n_prompt_blocks == 0:
            return least_loaded
        limit = LOAD_GUARD_RATIO * loads.mean() + 1.0
        allowed = [i for i in range(len(replicas)) if loads[i] <= limit]
        best = min(allowed, key=lambda i: (-matched[i], loads[i], i))
        gain_blocks = matched[best] - matched[least_loaded]
        if gain_blocks >= MIN_GAIN_SHARE * n_prompt_blocks:
            return best
        return least_loaded


def _prompt_blocks(sched, rid: int) -> int:
    return len(sched.keys_of(rid)) if hasattr(sched, "radix") else 0


def _cached_blocks(sched, rid: int) -> int:
    """Blocks of the prompt this replica's radix cache holds now (0 without a radix cache); a
    read-only peek, so routing does not keep prefixes warm on replicas that never serve them."""
    if not hasattr(sched, "radix"):
        return 0
    return sched.radix.cached_prefix_blocks(sched.keys_of(rid))
