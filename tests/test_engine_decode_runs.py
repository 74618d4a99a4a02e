"""Decode runs (several decode steps planned at once) must equal the same steps taken one at a time.

`sim.engine.sched.decode_runs.MAX_DECODE_RUN_STEPS = 1` turns every run into a single step. On realistic slices of
the bundled traces (preemption by recompute and swap, radix hits and evictions, several replicas),
the requests frame, the summary and the steps table must agree with the normal run; times agree to
1e-9 s (runs add step times in a different order, so the last bits may differ), everything
else exactly. The normal run includes decode runs past finishes (sim/engine/sched/past_finishes.py).
Static batching is not covered: its batch decode never consults the constant.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import sim.engine.sched.base as sched_base
import sim.engine.sched.decode_runs as decode_runs
from sim.inputs.config import EngineConfig
from sim.run.invoke import load_run_workload
from sim.run.simulate import simulate
from sim.run.summary import requests_frame, summarize

TIME_ATOL_S = 1e-9
# depend on decode-run length today (B3); compared in their own test
KV_METRICS = ("kv_utilization_mean", "kv_fragmentation")


@pytest.fixture(scope="module")
def splitwise():
    return load_run_workload("splitwise_conv", rate_scale=4, max_requests=300)


@pytest.fixture(scope="module")
def mooncake():
    return load_run_workload("mooncake_conversation", rate_scale=0.25, max_requests=100)


PAST_FINISHES = {"runs": 0}  # runs past finishes committed by the last `run_both` with decode runs


def run_both(cfg: EngineConfig, workload, monkeypatch):
    """(frame, summary, steps, n_commits) with decode runs, then with single steps only."""
    out = []
    for longest in (decode_runs.MAX_DECODE_RUN_STEPS, 1):
        monkeypatch.setattr(decode_runs, "MAX_DECODE_RUN_STEPS", longest)
        n_commits = [0]
        original = sched_base.Scheduler.commit
        if longest > 1:
            PAST_FINISHES["runs"] = 0

        def counting_commit(self, plan, end_s, original=original, n_commits=n_commits, longest=longest):
            n_commits[0] += 1
            if longest > 1 and plan.seq_steps is not None:
                PAST_FINISHES["runs"] += 1
            return original(self, plan, end_s)

        monkeypatch.setattr(sched_base.Scheduler, "commit", counting_commit)
        result = simulate(cfg.model_copy(update={"record_steps": True}), workload, core="engine")
        monkeypatch.setattr(sched_base.Scheduler, "commit", original)
        out.append((requests_frame(result), summarize(result), result.recorder.steps_frame(), n_commits[0]))
    return out


def assert_frames_match(left: pd.DataFrame, right: pd.DataFrame, skip=()):
    assert list(left.columns) == list(right.columns) and len(left) == len(right)
    for column in left.columns:
        if column in skip:
            continue
        a, b = left[column].to_numpy(), right[column].to_numpy()
        if a.dtype.kind == "f":
            np.testing.assert_allclose(a, b, rtol=0, atol=TIME_ATOL_S, equal_nan=True, err_msg=column)
        elif a.dtype.kind == "O":
            assert left[column].equals(right[column]), column
        else:
            assert (a == b).all(), f"{column}: first difference at row {int(np.argmax(a != b))}"


def assert_summaries_match(left: dict, right: dict):
    assert left.keys() == right.keys()
    for key in left.keys() - {"wall_time_s", *KV_METRICS}:
        a, b = left[key], right[key]
        if isinstance(a, dict) and key != "placement":  # placement: structure, compared exactly
            assert a.keys() == b.keys(), key
            for stat in a:
                assert a[stat] == pytest.approx(b[stat], rel=1e-9, abs=TIME_ATOL_S), f"{key}.{stat}"
        elif isinstance(a, float):
            assert a == pytest.approx(b, rel=1e-9, abs=TIME_ATOL_S), key
        else:
            assert a == b, key


def by_replica(steps: pd.DataFrame) -> pd.DataFrame:
    return steps.sort_values(["replica", "start_s"], kind="stable").reset_index(drop=True)


def check_equivalent(cfg, workload, monkeypatch):
    (frame, summary, steps, n_commits), (frame_1, summary_1, steps_1, n_commits_1) = run_both(cfg, workload,
                                                                                              monkeypatch)
    # the fast path really ran: far fewer commits than steps, while single-step mode commits every step
    assert n_commits_1 == summary_1["n_steps"]
    assert n_commits < 0.7 * summary["n_steps"]
    assert_frames_match(frame, frame_1)
    assert_summaries_match(summary, summary_1)
    # steps are recorded as plans commit: with several replicas a run's rows come in one block
    assert_frames_match(by_replica(steps), by_replica(steps_1), skip=("kv_blocks_used",))
    return summary


SPLITWISE_CASES = [
    ("continuous", {}),
    ("continuous", {"num_gpu_blocks_override": 600}),
    ("continuous", {"num_gpu_blocks_override": 600, "preemption_mode": "swap"}),
    ("continuous", {"replicas": 2, "router": "least_outstanding", "num_gpu_blocks_override": 400}),
    ("continuous", {"replicas": 2, "router": "round_robin", "num_gpu_blocks_override": 400}),
    ("chunked", {}),
    ("chunked", {"num_gpu_blocks_override": 600}),
    ("chunked", {"num_gpu_blocks_override": 600, "preemption_mode": "swap", "max_num_batched_tokens": 256}),
    # a request preempted to recompute gets its first small chunk back at the very next step
    ("chunked", {"num_gpu_blocks_override": 600, "chunk_size": 64}),
    ("radix", {"num_gpu_blocks_override": 600, "radix_chunked": False}),
]


@pytest.mark.parametrize(("policy", "knobs"), SPLITWISE_CASES)
def test_splitwise_slice_single_steps_equal_decode_runs(splitwise, monkeypatch, policy, knobs):
    summary = check_equivalent(EngineConfig(policy=policy, **knobs), splitwise, monkeypatch)
    assert summary["n_finished"] == 300
    if knobs.get("num_gpu_blocks_override"):
        assert summary["preemptions"] > 0  # the preemption paths were part of the comparison
    # runs past finishes were part of it too, except where a router reads the replicas mid-run
    assert (PAST_FINISHES["runs"] > 0) == (knobs.get("router") != "least_outstanding")


MOONCAKE_CASES = [
    {},
    {"num_gpu_blocks_override": 4000},
    {"num_gpu_blocks_override": 4000, "preemption_mode": "swap", "radix_ordering": "lpm"},
]


@pytest.mark.parametrize("knobs", MOONCAKE_CASES)
def test_mooncake_slice_radix_single_steps_equal_decode_runs(mooncake, monkeypatch, knobs):
    cfg = EngineConfig(policy="radix", max_model_len=131072, **knobs)
    summary = check_equivalent(cfg, mooncake, monkeypatch)
    assert summary["prefix_hit_rate"] > 0.02 and summary["evicted_blocks"] > 0
    assert PAST_FINISHES["runs"] > 0


@pytest.mark.parametrize(("workload", "knobs"), [
    ("splitwise", {"policy": "continuous", "num_gpu_blocks_override": 600}),
    ("splitwise", {"policy": "chunked", "replicas": 2, "router": "random"}),
    # a finished request's prompt blocks stay cached: releasing it moves them from request blocks to cache
    ("mooncake", {"policy": "radix", "max_model_len": 131072, "num_gpu_blocks_override": 4000}),
])
def test_kv_metrics_equal_single_steps(request, monkeypatch, workload, knobs):
    cfg = EngineConfig(**knobs)
    (_, summary, steps, _), (_, summary_1, steps_1, _) = run_both(cfg, request.getfixturevalue(workload), monkeypatch)
    assert PAST_FINISHES["runs"] > 0
    for key in KV_METRICS:
        assert summary[key] == pytest.approx(summary_1[key], rel=1e-9), key
    assert (steps["kv_blocks_used"].to_numpy() == steps_1["kv_blocks_used"].to_numpy()).all()
