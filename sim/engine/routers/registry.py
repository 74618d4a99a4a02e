"""Routers by the name `--router` gives."""

from __future__ import annotations

import numpy as np

from sim.engine.routers.prefix import PrefixAffinityRouter
from sim.engine.routers.simple import LeastKVRouter, LeastOutstandingRouter, RandomRouter, RoundRobinRouter, Router


def make_router(name: str, rng: np.random.Generator) -> Router:
    routers = {
        "round_robin": RoundRobinRouter,
        "random": lambda: RandomRouter(rng),
        "least_outstanding": LeastOutstandingRouter,
        "least_kv": LeastKVRouter,
        "prefix_affinity": PrefixAffinityRouter,
    }
    return routers[name]()
