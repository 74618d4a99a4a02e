"""Routers: which replica a new request goes to. `pick` sees the replicas' schedulers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sim.engine import Replica


class Router:
    def pick(self, rid: int, replicas: Sequence[Replica], now_s: float) -> int:  # pragma: no cover
        raise NotImplementedError


class RoundRobinRouter(Router):
    def __init__(self) -> None:
        self._next = 0

    def pick(self, rid, replicas, now_s) -> int:
        index = self._next % len(replicas)
        self._next += 1
        return index


class RandomRouter(Router):
    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def pick(self, rid, replicas, now_s) -> int:
        return int(self.rng.integers(len(replicas)))


class LeastOutstandingRouter(Router):
    """Fewest requests queued or running; ties to the lowest index."""

    def pick(self, rid, replicas, now_s) -> int:
        loads = [r.sched.n_outstanding() for r in replicas]
        return int(np.argmin(loads))


class LeastKVRouter(Router):
    """Lowest KV-cache utilisation, then fewest waiting."""

    def pick(self, rid, replicas, now_s) -> int:
        keys = [(r.sched.blocks.n_used / r.sched.blocks.n_blocks, len(r.sched.waiting)) for r in replicas]
        return min(range(len(replicas)), key=lambda i: keys[i])


def make_router(name: str, rng: np.random.Generator) -> Router:
    from sim.router_prefix import PrefixAffinityRouter

    routers = {
        "round_robin": RoundRobinRouter,
        "random": lambda: RandomRouter(rng),
        "least_outstanding": LeastOutstandingRouter,
        "least_kv": LeastKVRouter,
        "prefix_affinity": PrefixAffinityRouter,
    }
    return routers[name]()
