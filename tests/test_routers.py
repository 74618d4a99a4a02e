"""Routers: each rule on hand-built replica states, and prefix affinity against round robin on Mooncake."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from sim.engine.kv.blocks import BlockManager
from sim.engine.kv.radix import RadixCache
from sim.engine.routers.registry import make_router
from sim.inputs.config import EngineConfig
from sim.run.invoke import load_run_workload, run

PROMPT_KEYS = {  # rid -> the prompt's block keys (what RadixScheduler.keys_of returns)
    0: np.array([1, 2, 3, 4], dtype=np.int64),
    1: np.array([1, 9, 9, 9], dtype=np.int64),
    2: np.array([7, 7, 7, 7], dtype=np.int64),
}


class FakeSched:
    """The parts of a scheduler a router reads: outstanding requests, blocks, waiting, radix cache."""

    def __init__(self, n_outstanding=0, n_used=0, n_waiting=0, cached=()):
        self._n_outstanding = n_outstanding
        self.blocks = BlockManager(64, 16, 0, 0)
        self.blocks.allocate(n_used)
        self.waiting = [None] * n_waiting
        self.radix = RadixCache(self.blocks)
        for keys in cached:
            blocks = self.blocks.allocate(len(keys))
            self.radix.insert(np.asarray(keys, dtype=np.int64), blocks, 5.0)
            self.blocks.decref(blocks)

    def n_outstanding(self) -> int:
        return self._n_outstanding

    def keys_of(self, rid: int) -> np.ndarray:
        return PROMPT_KEYS[rid]


def replicas(*scheds) -> list:
    return [SimpleNamespace(sched=s) for s in scheds]


def test_round_robin_cycles():
    router, reps = make_router("round_robin", np.random.default_rng(0)), replicas(*[FakeSched()] * 3)
    assert [router.pick(rid, reps, 0.0) for rid in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def test_random_is_seeded_and_in_range():
    reps = replicas(*[FakeSched()] * 4)
    routers = [make_router("random", np.random.default_rng(7)) for _ in range(2)]
    seqs = [[router.pick(rid, reps, 0.0) for rid in range(200)] for router in routers]
    assert seqs[0] == seqs[1]
    assert set(seqs[0]) == {0, 1, 2, 3}


@pytest.mark.parametrize("name", ["round_robin", "random"])
def test_assign_all_gives_the_picks_in_arrival_order(name):
    """State-free routers decide every arrival up front (per-replica horizons rest on it): the same
    replicas as picking one by one, continuing from picks already made."""
    reps = replicas(*[FakeSched()] * 3)
    one_by_one, up_front = (make_router(name, np.random.default_rng(11)) for _ in range(2))
    assert [one_by_one.pick(rid, reps, 0.0) for rid in range(5)] == [up_front.pick(rid, reps, 0.0) for rid in range(5)]
    picks = [one_by_one.pick(rid, reps, 0.0) for rid in range(500)]
    assert up_front.assign_all(500, 3).tolist() == picks
    assert one_by_one.pick(0, reps, 0.0) == up_front.pick(0, reps, 0.0)  # both routers moved on alike


@pytest.mark.parametrize("name", ["least_outstanding", "least_kv", "prefix_affinity"])
def test_state_reading_routers_decide_at_arrival(name):
    assert make_router(name, np.random.default_rng(0)).assign_all(10, 2) is None


def test_least_outstanding_takes_fewest_ties_to_lowest_index():
    router = make_router("least_outstanding", np.random.default_rng(0))
    assert router.pick(0, replicas(FakeSched(3), FakeSched(1), FakeSched(1)), 0.0) == 1


def test_least_kv_takes_lowest_utilisation_then_fewest_waiting():
    router = make_router("least_kv", np.random.default_rng(0))
    reps = replicas(FakeSched(n_used=10), FakeSched(n_used=4, n_waiting=3), FakeSched(n_used=4, n_waiting=1))
    assert router.pick(0, reps, 0.0) == 2


def test_prefix_affinity_follows_a_long_cached_prefix():
    router = make_router("prefix_affinity", np.random.default_rng(0))
    reps = replicas(FakeSched(1), FakeSched(2, cached=[[1, 2, 3]]), FakeSched(0))
    assert router.pick(0, reps, 10.0) == 1  # 3 of 4 blocks cached there; the least loaded holds none


def test_prefix_affinity_ignores_a_short_shared_prefix():
    """Block 1 is cached on two replicas (a system prompt): 1 of 4 blocks is not worth a detour."""
    router = make_router("prefix_affinity", np.random.default_rng(0))
    reps = replicas(FakeSched(2, cached=[[1]]), FakeSched(3, cached=[[1]]), FakeSched(1))
    assert router.pick(1, reps, 10.0) == 2


def test_prefix_affinity_load_guard():
    """Limit = 1.5 x mean load + 1 = 1.5 x 4 + 1 = 7: the replica with the prefix (load 10) is skipped."""
    router = make_router("prefix_affinity", np.random.default_rng(0))
    reps = replicas(FakeSched(10, cached=[[1, 2, 3, 4]]), FakeSched(3), FakeSched(2), FakeSched(1))
    assert router.pick(0, reps, 10.0) == 3


def test_prefix_affinity_peek_keeps_lru_times():
    sched = FakeSched(0, cached=[[1, 2, 3, 4]])
    router = make_router("prefix_affinity", np.random.default_rng(0))
    router.pick(0, replicas(sched, FakeSched(0)), 99.0)
    times = {node.last_access_s for node in sched.radix._root.children.values()}
    assert times == {5.0}


@pytest.fixture(scope="module")
def mooncake_runs() -> dict[str, dict]:
    """400 Mooncake conversation requests at 1.5x their recorded rate, 4 radix replicas of
    Llama-3.1-8B (128k context: the prompts average 12k tokens) on H100."""
    workload = load_run_workload("mooncake_conversation", max_requests=400, rate_scale=1.5)
    out = {}
    for router in ("round_robin", "prefix_affinity"):
        cfg = EngineConfig(model="llama-3.1-8b", hardware="h100-sxm", policy="radix", replicas=4, router=router)
        out[router] = run(cfg, workload).summary
    return out


def test_prefix_affinity_beats_round_robin_on_mooncake(mooncake_runs):
    rr, pa = mooncake_runs["round_robin"], mooncake_runs["prefix_affinity"]
    assert rr["n_finished"] == pa["n_finished"] == 400
    assert pa["ttft_s"]["mean"] < 0.9 * rr["ttft_s"]["mean"]
    assert pa["prefix_hit_rate"] > rr["prefix_hit_rate"]
