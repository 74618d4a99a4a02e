"""The router base and the routers that need no cache view: round robin, random, least outstanding,
least KV. `pick` sees the replicas' schedulers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from sim.engine.sched.base import Scheduler


class Replica(Protocol):
    """What a router sees of a replica (sim.engine.replica.Replica): its scheduler."""

    sched: Scheduler


class Router:
    def pick(self, rid: int, replicas: Sequence[Replica], now_s: float) -> int:  # pragma: no cover
        raise NotImplementedError

    def assign_all(self, n_requests: int, n_replicas: int) -> np.ndarray | None:
        """The replica of each of `n_requests` arrivals, decided up front, when the choice never
        depends on the replicas' state (exactly what `pick` would give, in arrival order); None
        when it does. Consumes the router's state as those picks would."""
        return None


class RoundRobinRouter(Router):
    def __init__(self) -> None:
        self._next = 0

    def pick(self, rid, replicas, now_s) -> int:
        index = self._next % len(replicas)
        self._next += 1
        return index

    def assign_all(self, n_requests: int, n_replicas: int) -> np.ndarray:
        first, self._next = self._next, self._next + n_requests
        return (first + np.arange(n_requests, dtype=np.int64)) % n_replicas


class RandomRouter(Router):
    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def pick(self, rid, replicas, now_s) -> int:
        return int(self.rng.integers(len(replicas)))

    def assign_all(self, n_requests: int, n_replicas: int) -> np.ndarray:
        return self.rng.integers(n_replicas, size=n_requests)  # the same draws as n_requests picks


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
