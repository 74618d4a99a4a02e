"""Prefix-affinity routing: send a request where its prompt prefix is cached, with a load guard."""

from __future__ import annotations

import numpy as np

from sim.router import Router

LOAD_GUARD_RATIO = 1.5  # a replica may take a prefix hit while its load <= ratio * mean load + 1


class PrefixAffinityRouter(Router):
    """The replica whose radix cache holds the longest prefix of the prompt, unless it is loaded
    well above the others (then least outstanding), so one hot prefix cannot swamp a replica."""

    def pick(self, rid, replicas, now_s) -> int:
        loads = np.array([r.sched.n_outstanding() for r in replicas], dtype=np.float64)
        limit = LOAD_GUARD_RATIO * loads.mean() + 1.0
        best, best_match = None, 0
        for i, replica in enumerate(replicas):
            sched = replica.sched
            if not hasattr(sched, "radix") or loads[i] > limit:
                continue
            matched = sched.radix.match_prefix(sched.keys_of(rid), now_s).n_blocks
            if matched > best_match:
                best, best_match = i, matched
        if best is not None:
            return best
        return int(np.argmin(loads))
