"""Benchmark-style workloads (`--bench`), seeded closed-loop jitter, and the one token budget of
chunked prefill (max_num_batched_tokens; --chunk-size caps one request's chunk)."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.errors import InputError
from sim.inputs.config import EngineConfig
from sim.inputs.workload.bench import bench_workload
from sim.inputs.workload.trace import ClosedLoop, Trace
from sim.run.simulate import simulate
from sim.run.summary import requests_frame


class UnitCost:
    """Every step costs 1 s; records each step's new-token counts."""

    def __init__(self, model_name="llama-3-8b"):
        from sim.inputs.hardware import load_hardware
        from sim.inputs.model import load_model

        self.model, self.hw = load_model(model_name), load_hardware("h100-sxm")
        self.kv_bytes_per_token_layer_gpu = 2 * 8 * 128 * 2
        self.steps: list[list[int]] = []

    def step_time_s(self, q, c, n_sampled, verify_tokens=1):
        self.steps.append(list(np.asarray(q).tolist()))
        return 1.0

    def decode_run(self, contexts, n_steps):
        self.steps += [[1] * len(contexts)] * n_steps
        return np.ones(n_steps), None

    def decode_run_times_s(self, contexts, n_steps):
        return self.decode_run(contexts, n_steps)[0]


def test_chunked_budget_is_max_num_batched_tokens_and_chunk_size_caps_one_request():
    trace = Trace(np.zeros(2), np.array([100, 100]), np.array([2, 2]))
    cost = UnitCost()
    simulate(EngineConfig(policy="chunked", max_num_batched_tokens=64), trace, cost=cost)
    assert cost.steps[0] == [64]  # one request takes the whole budget
    cost = UnitCost()
    simulate(EngineConfig(policy="chunked", max_num_batched_tokens=64, chunk_size=40), trace, cost=cost)
    assert cost.steps[0] == [40, 24]  # capped at 40, the rest of the budget goes to the next request


def test_chunk_size_with_a_policy_it_does_not_apply_to_is_refused():
    with pytest.raises(ValueError, match="chunk_size caps one request"):
        EngineConfig(policy="continuous", chunk_size=256)
    with pytest.raises(ValueError, match="must not exceed max_num_batched_tokens"):
        EngineConfig(policy="chunked", chunk_size=4096, max_num_batched_tokens=2048)


def test_bench_specs_build_the_benchmark_workloads():
    batch = bench_workload("batch=8,isl=32,osl=128")
    assert isinstance(batch, Trace) and len(batch) == 8
    assert (batch.arrival_s == 0).all() and set(batch.prompt_tokens) == {32} and set(batch.output_tokens) == {128}
    loop = bench_workload("requests=100,concurrency=4,isl=64,osl=16,think_s=0.5,think_cv=1.0")
    assert isinstance(loop, ClosedLoop) and loop.concurrency == 4 and len(loop.pool) == 100
    jittered = bench_workload("requests=200,isl=100,osl=100,jitter=0.2")
    assert 80 <= jittered.prompt_tokens.min() < jittered.prompt_tokens.max() <= 120
    assert (bench_workload("requests=200,isl=100,osl=100,jitter=0.2").prompt_tokens == jittered.prompt_tokens).all()


@pytest.mark.parametrize(("spec", "message"), [
    ("isl=32,osl=8", "exactly one of batch=N"),
    ("batch=8,requests=8,isl=1,osl=1", "exactly one of batch=N"),
    ("batch=8,isl=32,osl=8,concurrency=2", "fixed batch has no concurrency"),
    ("requests=8,isl=32,osl=8,think_s=1", "need concurrency"),
    ("requests=8,isl=32,osl=8,jitter=1.5", "jitter"),
    ("requests=8,isl=0,osl=8", "isl"),
    ("requests=8,isl=32,osl=8,color=red", "keys batch"),
])
def test_bad_bench_specs_are_one_line(spec, message):
    with pytest.raises(InputError, match=message):
        bench_workload(spec)
    result = CliRunner().invoke(app, ["simulate", "--bench", spec])
    assert result.exit_code == 2 and message.split()[0] in result.output


def _closed_loop_arrivals(cv: float, seed: int = 0) -> np.ndarray:
    pool = Trace(np.zeros(40), np.full(40, 64), np.full(40, 8))
    cfg = EngineConfig(model="llama-3-8b", max_num_seqs=256, seed=seed)
    result = simulate(cfg, ClosedLoop(pool, concurrency=4, think_time_s=2.0, think_time_cv=cv, seed=seed),
                      cost=UnitCost())
    return requests_frame(result)["arrival_s"].to_numpy()


def test_think_time_jitter_breaks_lockstep_and_is_seeded():
    fixed = _closed_loop_arrivals(0.0)
    # without jitter the 4 identical clients send in lockstep: arrivals come in groups of 4
    assert len(np.unique(fixed)) == 10
    jittered = _closed_loop_arrivals(1.0)
    assert len(np.unique(jittered)) > 20
    assert (jittered == _closed_loop_arrivals(1.0)).all()
    assert not (jittered == _closed_loop_arrivals(1.0, seed=1)).all()


@pytest.mark.parametrize(("knobs", "message"), [
    ({"num_scheduler_steps": 4}, "give --engine"),
    ({"enforce_eager": True}, "give --engine"),
    ({"policy": "chunked", "radix_ordering": "lpm"}, "needs policy radix"),
    ({"policy": "continuous", "batching_window_s": 0.5}, "needs policy static"),
])
def test_a_knob_that_would_do_nothing_is_refused(knobs, message):
    with pytest.raises(ValueError, match=message):
        EngineConfig(**knobs)
    assert EngineConfig(engine="vllm", num_scheduler_steps=4).num_scheduler_steps == 4
    assert EngineConfig(engine="sglang", policy="chunked").radix_ordering == "fcfs"  # the preset's lpm stays out
