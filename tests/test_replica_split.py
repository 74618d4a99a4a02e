"""Replicas simulated apart (sim.run.replica_split) give the whole run's output bit for bit: requests
frame, summary (but the wall time) and steps table, on every policy and the features that keep
per-replica state (spec decoding with per-replica seeds, mixed hardware, radix + host tier,
parallel samples, swap, latency attribution)."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.engine.request import RUN_STATE_COLUMNS, RequestTable
from sim.inputs.config import EngineConfig
from sim.inputs.workload.trace import ClosedLoop, Trace
from sim.run.backends import LocalBackend, RayBackend
from sim.run.invoke import load_run_workload
from sim.run.replica_split import replica_shares, simulate_cluster, simulate_split, why_not_split
from sim.run.simulate import simulate
from sim.run.summary import requests_frame, summarize

CASES = {
    "chunked round robin": ("splitwise", dict(policy="chunked")),
    "continuous random, steps": ("splitwise", dict(policy="continuous", router="random", record_steps=True)),
    "spec decoding, mixed hardware": ("splitwise", dict(policy="chunked", spec_tokens=2,
                                                        replica_hardware=["h100-sxm", "a100-80g-sxm", "h100-sxm"])),
    "radix, samples, steps": ("prompts", dict(policy="radix", record_steps=True)),
    "radix host tier, tiny cache": ("mooncake", dict(policy="radix", cpu_cache_gib=2.0, num_gpu_blocks_override=800)),
    "swap under pressure": ("mooncake", dict(policy="chunked", num_gpu_blocks_override=600, preemption_mode="swap")),
    "static": ("splitwise", dict(policy="static")),
    "engine preset": ("prompts", dict(engine="vllm", policy="chunked")),
}


@pytest.fixture(scope="module")
def workloads():
    return {"splitwise": load_run_workload("splitwise_conv", rate_scale=8, max_requests=1500),
            "prompts": load_run_workload("workloads/system_prompts.yaml", rate_scale=2, max_requests=600),
            "mooncake": load_run_workload("mooncake_conversation", rate_scale=0.5, max_requests=300)}


def in_process(fn, arg_tuples):
    """A backend's `run_tasks` without processes, finishing the tasks in reverse order."""
    for index in reversed(range(len(arg_tuples))):
        yield index, fn(*arg_tuples[index])


def assert_same_output(whole, split):
    whole_frame, split_frame = requests_frame(whole), requests_frame(split)
    assert whole_frame.equals(split_frame)
    whole_summary, split_summary = summarize(whole, whole_frame), summarize(split, split_frame)
    whole_summary.pop("wall_time_s"), split_summary.pop("wall_time_s")
    assert repr(whole_summary) == repr(split_summary)  # repr: NaN == NaN, bit-exact floats
    if whole.cfg.record_steps:
        assert whole.recorder.steps_frame().equals(split.recorder.steps_frame())


@pytest.mark.parametrize("case", list(CASES))
def test_replicas_apart_give_the_whole_runs_output(workloads, case):
    trace_name, settings = CASES[case]
    cfg = EngineConfig(replicas=3, seed=4, **settings)
    trace = workloads[trace_name]
    whole = simulate(cfg, trace)
    assert len({int(r) for r in requests_frame(whole).replica}) == 3
    assert_same_output(whole, simulate_split(cfg, trace, in_process))


def test_replicas_left_without_requests(workloads):
    cfg = EngineConfig(replicas=5)
    trace = workloads["splitwise"].take(range(3))
    assert_same_output(simulate(cfg, trace), simulate_split(cfg, trace, in_process))


def test_worker_processes_give_the_same_output(workloads):
    cfg = EngineConfig(replicas=4, policy="chunked", record_steps=True)
    trace = workloads["prompts"]
    seen = []
    with LocalBackend(2) as backend:
        split = simulate_cluster(cfg, trace, backend, progress=lambda done, total: seen.append((done, total)))
    assert_same_output(simulate(cfg, trace), split)
    assert seen[-1] == (len(trace), len(trace)) and len(seen) == 4


def test_a_ray_cluster_gives_the_same_output(workloads):
    ray = pytest.importorskip("ray")
    cfg = EngineConfig(replicas=3, policy="radix", router="random")
    trace = workloads["prompts"]
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        with RayBackend(None, 2) as backend:
            split = simulate_cluster(cfg, trace, backend)
    finally:
        ray.shutdown()
    assert_same_output(simulate(cfg, trace), split)


def test_shares_are_the_whole_runs_router_picks(workloads):
    trace = workloads["splitwise"]
    for router in ("round_robin", "random"):
        cfg = EngineConfig(replicas=3, router=router, seed=9)
        placed = requests_frame(simulate(cfg, trace)).replica.to_numpy()
        for replica, rows in enumerate(replica_shares(cfg, trace)):
            assert (np.flatnonzero(placed == replica) == rows).all()


def test_runs_whose_replicas_interact_are_not_split(workloads):
    trace = workloads["splitwise"]
    assert why_not_split(EngineConfig(replicas=2), trace) is None
    assert "one replica" in why_not_split(EngineConfig(replicas=1), trace)
    assert "least_kv" in why_not_split(EngineConfig(replicas=2, router="least_kv"), trace)
    assert "disaggregated" in why_not_split(EngineConfig(prefill_replicas=1, decode_replicas=1), trace)
    closed = ClosedLoop(pool=trace, concurrency=4)
    assert "closed-loop" in why_not_split(EngineConfig(replicas=2), closed)
    with pytest.raises(Exception, match="--workers"):
        simulate_cluster(EngineConfig(replicas=2, router="least_outstanding"), trace, LocalBackend(2))


@pytest.mark.parametrize("args, message", [
    (["--replicas", "2", "--router", "least_kv", "--workers", "2"],
     "--workers: must be 1 for this run: router least_kv"),
    (["--workers", "0"], "--workers: must be at least 1"),
])
def test_cli_refuses_workers_it_cannot_use_in_one_line(args, message):
    result = CliRunner().invoke(app, ["simulate", "--max-requests", "50", "--json", *args])
    assert result.exit_code == 2
    assert message in result.output and len(result.output.strip().splitlines()) == 1


def test_one_replica_or_one_worker_runs_in_process(workloads):
    trace = workloads["splitwise"]
    cfg = EngineConfig(replicas=1)
    assert requests_frame(simulate_cluster(cfg, trace, LocalBackend(4))).equals(requests_frame(simulate(cfg, trace)))


def test_every_column_a_run_writes_travels_back(workloads):
    """A new RequestTable column must be listed as run state (copied back from a share) or come
    from the trace; otherwise split runs would silently lose it."""
    table = RequestTable(workloads["prompts"], 4096)
    from_trace = {"sample_of", "prompt_tokens", "output_tokens", "final_tokens"}
    arrays = {name for name, value in vars(table).items() if isinstance(value, np.ndarray)}
    assert arrays == from_trace | set(RUN_STATE_COLUMNS)


def test_a_replicas_clock_ignores_other_replicas_arrivals():
    """SimPy lands a timeout at now + delay, and now + (at - now) can be an ulp past `at` (this
    pair): timed from the other replica's arrival, request 1 would be scheduled at 1 + 4 ulp."""
    other_s, at_s = 1.5 * 2 ** -52, 1 + 3 * 2 ** -52
    assert other_s + (at_s - other_s) != at_s
    trace = Trace(arrival_s=np.array([other_s, at_s]), prompt_tokens=np.array([100, 100]),
                  output_tokens=np.array([5, 5]))
    frame = requests_frame(simulate(EngineConfig(replicas=2, router="round_robin"), trace))
    assert frame.replica.tolist() == [0, 1]
    assert frame.scheduled_s[1] == at_s
