"""Decode runs past finishes (sim/engine/sched/past_finishes.py): each step costs exactly what a plain decode
run of the sequences still going would, the run stops where it must, and it is only used where no one
reacts to a finish before the run's commit. Equality with single steps on whole replays is in
test_engine_decode_runs.py."""

from __future__ import annotations

import numpy as np
import pytest

from sim.cost import CostModel
from sim.cost.runs_past_finishes import decode_steps_past_finishes
from sim.inputs.config import EngineConfig
from sim.inputs.hardware import load_hardware
from sim.inputs.model import load_model
from sim.inputs.workload.trace import ClosedLoop, Trace
from sim.run.simulate import simulate
from sim.run.summary import requests_frame


@pytest.fixture(scope="module")
def hot():
    return CostModel(load_model("llama-3-8b"), load_hardware("h100-sxm"))._hot


def going(contexts, remaining, step):
    """Contexts, at `step`, of the sequences that still compute a token there."""
    return [c + step for c, n_left in zip(contexts, remaining) if n_left > step]


def blocks_held(contexts, size):
    return sum(-(-c // size) for c in contexts)


@pytest.mark.parametrize("seed", range(6))
def test_each_step_is_a_plain_run_step_of_the_sequences_still_going(hot, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    contexts = rng.integers(1, 3000, n).tolist()
    remaining = rng.integers(1, 60, n).tolist()
    run = decode_steps_past_finishes(hot, contexts, remaining, 0.0, np.inf, 10_000, 10**9)
    size = hot.block_size
    assert len(run.times_s) == max(remaining)  # nothing cut it short: everyone ran to the end
    for step, time_s in enumerate(run.times_s):
        now = going(contexts, remaining, step)
        assert run.n_active[step] == len(now)
        # bit for bit what a plain decode run of them would take (the engine's next plan after a finish)
        plain_s, plain_kv = hot.decode_run(np.array(now), 1)
        assert time_s == plain_s[0] and run.kv_tokens[step] == plain_kv[0]
        assert time_s == pytest.approx(hot.step_time_s_scalar([1] * len(now), now, len(now)), rel=1e-12)
        after = [c + 1 for c in now]
        assert run.kv_tokens[step] == blocks_held(after, size) * size
        assert run.taken[step] == blocks_held(after, size) - blocks_held(now, size)


def test_the_run_stops_at_the_horizon_the_blocks_and_max_steps(hot):
    contexts, remaining = [100, 200, 300, 15], [3, 50, 80, 80]
    whole = decode_steps_past_finishes(hot, contexts, remaining, 0.0, np.inf, 10_000, 10**9)
    ends = np.cumsum(whole.times_s)
    horizon = float(ends[20] - 1e-7)  # falls during step 20: that step is the last
    cut = decode_steps_past_finishes(hot, contexts, remaining, 0.0, horizon, 10_000, 10**9)
    assert cut.times_s == whole.times_s[:21]
    later = decode_steps_past_finishes(hot, contexts, remaining, 5.0, 5.0 + horizon, 10_000, 10**9)
    assert later.times_s == whole.times_s[:21]  # the horizon counts from the run's start
    free = sum(whole.taken[:30])
    short = decode_steps_past_finishes(hot, contexts, remaining, 0.0, np.inf, 10_000, free)
    n_fit = int(np.searchsorted(np.cumsum(whole.taken), free, side="right"))  # steps whose blocks fit
    assert len(short.times_s) == n_fit and sum(short.taken) <= free
    assert decode_steps_past_finishes(hot, contexts, remaining, 0.0, np.inf, 7, 10**9).times_s == whole.times_s[:7]


def test_a_closed_loops_clients_send_at_the_finish_instant():
    """Clients react to each finish: their next request must arrive exactly a think time after the
    previous one ended, which a run past finishes would only report at its commit."""
    think_s = 0.05
    pool = Trace(np.zeros(24), np.full(24, 64), np.array([5, 40, 9, 70] * 6))
    result = simulate(EngineConfig(model="llama-3-8b"), ClosedLoop(pool, concurrency=4, think_time_s=think_s, seed=0))
    frame = requests_frame(result)
    sends = {finish_s + think_s for finish_s in frame["finish_s"].tolist()}
    later = frame["arrival_s"].to_numpy()[4:]
    assert all(arrival in sends for arrival in later.tolist())


@pytest.mark.parametrize(("replicas", "router", "passes"), [(1, "round_robin", True), (3, "round_robin", True),
                                                          (3, "random", True), (3, "least_kv", False),
                                                          (3, "least_outstanding", False)])
def test_only_replicas_no_one_reads_mid_run_pass_finishes(replicas, router, passes):
    trace = Trace(np.linspace(0.0, 2.0, 60), np.full(60, 256), np.tile([8, 30, 90], 20))
    result = simulate(EngineConfig(model="llama-3-8b", replicas=replicas, router=router), trace, core="engine")
    assert [replica.sched.runs_past_finishes for replica in result.replicas] == [passes] * replicas
