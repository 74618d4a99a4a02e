"""The engine (sim/engine/sched: decode runs, runs past finishes, residue counting, scalar fast paths)
and the fused core (sim/engine/fused: one flat loop with running sums, which `simulate` takes where it
covers the run) give what the reference stepper (sim/engine/reference: one step, one batch, no fast
path) gives, on
bundled traces: the same requests table (every column: arrival, scheduled, first token, finish, token
counts, preemptions, status, reject reasons, and the latency attribution's `attr_*_s` parts, which
every case but one turns on as the default does), the same steps table (batch size, prefill and decode
tokens, KV blocks used: exact; start and duration: to rounding) and the same summary.

Integers and text must be identical. Times may differ by rounding only, because the two sum floats
in different orders: the engine moves its clock by a decode run's summed step times (`np.add.reduce`,
then SimPy's `now + duration`) and records a run's later inter-token gaps as its step times, where the
reference adds one step at a time and takes gaps as differences of clock readings; the engine prices a
decode run's steps through `HotPath.decode_run` / `decode_steps_until` (Python's `**` may differ from
numpy's in the last bit); its KV integrals over a run are dot products; SimPy lands an arrival at
`now + (arrival - now)`. So a time (seconds, or milliseconds in the summary) may differ by 1e-12 of
the run's clock (its makespan), and every other float (throughputs, KV utilisation and fragmentation)
by 1e-12 relative. With a constant power-of-two step time and arrivals on its grid every sum is exact,
and there the two must agree bit for bit (ties between an arrival and a step's end included).

The fused core adds steps to its clock one at a time as the reference does and prices a decode step
from its sums with the same float operations, so its times equal the reference's bit for bit on these
cases; only its inter-token gap mean and per-request joules may differ in rounding (it keeps one
(gap, count) pair per step and shares decode joules through one running total), and it is held to
the same tolerances. Every case here, asynchronous scheduling included, runs through it. Its latency
attribution books a running sequence's decode, swap and sat-out prefill time as differences of
running totals when it leaves the batch, where the reference books them step by step: rounding again.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import STEP_S, ConstantCost, make_trace

from sim.engine.fused.continuous import FusedRecord
from sim.engine.metrics import Recorder
from sim.inputs.config import EngineConfig
from sim.run.invoke import load_run_workload
from sim.run.reference import simulate_reference
from sim.run.simulate import simulate
from sim.run.summary import requests_columns, summarize

TOLERANCE = 1e-12
MAX_FLEET_W = 1e4  # the watts a reference run's replica may draw (one replica, up to 8 GPUs)

# (name, workload (bundled trace or spec, rate scale, requests, seed), engine knobs, what the case must exercise)
CASES = [
    ("conv", ("splitwise_conv", 4, 300, 0), {}, {}),
    ("conv-preempts", ("splitwise_conv", 4, 300, 0), {"num_gpu_blocks_override": 600}, {"preemptions"}),
    ("conv-swaps", ("splitwise_conv", 4, 300, 0), {"num_gpu_blocks_override": 600, "preemption_mode": "swap"},
     {"preemptions"}),
    ("conv-reserve-full", ("splitwise_conv", 4, 300, 0), {"num_gpu_blocks_override": 600,
                                                           "kv_admission": "reserve_full"}, {}),
    ("conv-few-seats", ("splitwise_conv", 8, 300, 0), {"max_num_seqs": 8, "max_num_batched_tokens": 1024}, {}),
    ("code", ("splitwise_code", 2, 300, 0), {}, {}),
    ("azure-conv", ("AzureLLMInferenceTrace_conv", 1, 300, 0), {}, {}),
    ("azure-code-tight", ("AzureLLMInferenceTrace_code", 1, 300, 0), {"num_gpu_blocks_override": 300},
     {"preemptions", "rejections"}),
    ("mooncake-rejects", ("mooncake_conversation", 0.25, 80, 0), {"max_model_len": 16384}, {"rejections"}),
    ("sharegpt-seed-1", ("workloads/poisson_sharegpt.yaml", None, 300, 1), {}, {}),
    ("sharegpt-seed-2", ("workloads/poisson_sharegpt.yaml", 3, 300, 2), {"num_gpu_blocks_override": 800},
     {"preemptions"}),
    ("vllm-preset", ("splitwise_conv", 4, 300, 0), {"engine": "vllm@0.6"}, {}),
    # asynchronous scheduling: an arrival during step n joins step n+2
    ("async-preset", ("splitwise_conv", 4, 300, 0), {"engine": "vllm@0.15", "policy": "continuous"}, {}),
    ("async-preemption", ("splitwise_conv", 4, 300, 0),
     {"engine": "sglang@0.4", "policy": "continuous", "num_gpu_blocks_override": 600},
     {"preemptions"}),
    # held-back arrivals that never fit are rejected when handed over, even while the queue is stuck
    ("async-rejects", ("AzureLLMInferenceTrace_code", 1, 300, 0),
     {"engine": "vllm@0.15", "policy": "continuous", "num_gpu_blocks_override": 300},
     {"rejections"}),
    ("70b-tp4", ("splitwise_conv", 4, 300, 0), {"model": "llama-2-70b", "tp": 4, "max_num_seqs": 32}, {}),
    ("no-attribution", ("splitwise_conv", 4, 300, 0), {"num_gpu_blocks_override": 600, "preemption_mode": "swap",
                                                        "latency_attribution": False}, {"preemptions"}),
    # chunked prefill
    ("chunked-conv", ("splitwise_conv", 4, 300, 0), {"policy": "chunked"}, {}),
    ("chunked-preempts", ("splitwise_conv", 4, 300, 0), {"policy": "chunked", "num_gpu_blocks_override": 600},
     {"preemptions"}),
    ("chunked-swaps", ("splitwise_conv", 4, 300, 0),
     {"policy": "chunked", "num_gpu_blocks_override": 600, "preemption_mode": "swap"}, {"preemptions"}),
    ("chunked-reserve-full", ("splitwise_conv", 4, 300, 0),
     {"policy": "chunked", "num_gpu_blocks_override": 600, "kv_admission": "reserve_full"}, {}),
    ("chunked-small-chunks", ("splitwise_code", 2, 300, 0),
     {"policy": "chunked", "max_num_batched_tokens": 512, "chunk_size": 128}, {}),
    ("chunked-tight", ("AzureLLMInferenceTrace_code", 1, 300, 0), {"policy": "chunked", "num_gpu_blocks_override": 300},
     {"preemptions", "rejections"}),
    ("chunked-async", ("splitwise_conv", 4, 300, 0), {"policy": "chunked", "engine": "vllm@0.15"}, {}),
    # decode steps beside partial prefills that hold blocks (a step prices only the decoders' KV)
    ("chunked-stuck-prefills", ("AzureLLMInferenceTrace_code", 1, 150, 0),
     {"policy": "chunked", "block_size": 8, "num_gpu_blocks_override": 600, "max_num_seqs": 4, "watermark": 0.1,
      "chunk_size": 256}, {}),
    # a stuck queue's decode run must not pass held-back arrivals (ChunkedScheduler, as the continuous one)
    ("chunked-async-rejects", ("AzureLLMInferenceTrace_code", 1, 300, 0),
     {"policy": "chunked", "engine": "vllm@0.15", "num_gpu_blocks_override": 300}, {"rejections"}),
]


def run_all(workload_args, knobs):
    """(engine, reference, what `simulate` chose) of one case."""
    name, rate_scale, n_requests, seed = workload_args
    workload = load_run_workload(name, rate_scale=rate_scale, max_requests=n_requests, seed=seed)
    cfg = EngineConfig(**{"latency_attribution": True, "record_steps": True, **knobs})
    return simulate(cfg, workload, core="engine"), simulate_reference(cfg, workload), simulate(cfg, workload)


def assert_same_run(run, reference) -> None:
    """`run` (engine or fused core) gives the reference's requests, steps and summary (module docstring)."""
    clock_s = reference.sim_duration_s
    assert_same_columns("requests", requests_columns(run), requests_columns(reference), clock_s)
    steps_frame = run.recorder.steps_frame()  # what a run folder's steps.parquet holds
    steps = {column: steps_frame[column].to_numpy() for column in steps_frame.columns}
    assert_same_columns("steps", steps, reference.recorder.steps_columns(), clock_s)
    summary, reference_summary = summarize(run), summarize(reference)
    summary.pop("wall_time_s"), reference_summary.pop("wall_time_s")
    assert_close("summary", summary, reference_summary, clock_s)


def assert_close(path: str, engine, reference, clock_s: float) -> None:
    """`engine` and `reference` (summary values, nested) equal: floats to rounding (module docstring)."""
    if isinstance(engine, dict):
        assert engine.keys() == reference.keys(), path
        for key in engine:
            assert_close(f"{path}.{key}", engine[key], reference[key], clock_s)
    elif isinstance(engine, float) and isinstance(reference, float):
        if path.endswith("_ms") or "_ms." in path:
            bound = TOLERANCE * clock_s * 1e3
        elif (path.endswith("_s") or "_s." in path) and not path.endswith("_tok_s"):  # tok_s: a rate
            bound = TOLERANCE * clock_s
        elif path.endswith("_j"):  # joules: idle energy is watts x (run time - busy time), a time's rounding
            bound = TOLERANCE * max(abs(engine), abs(reference), clock_s * MAX_FLEET_W)
        else:
            bound = TOLERANCE * max(abs(engine), abs(reference))
        assert math.isnan(engine) and math.isnan(reference) or abs(engine - reference) <= bound, \
            (path, engine, reference)
    else:
        assert engine == reference, (path, engine, reference)


def assert_same_columns(what: str, engine: dict, reference: dict, clock_s: float) -> None:
    assert list(engine) == list(reference), what
    for column in engine:
        x, y = np.asarray(engine[column]), np.asarray(reference[column])
        assert x.shape == y.shape, (what, column)
        if x.dtype.kind == "f" and column != "kv_blocks_used":
            far = ~np.isclose(x, y, rtol=0, atol=TOLERANCE * clock_s, equal_nan=True)
            assert not far.any(), (what, column, np.flatnonzero(far)[:5], x[far][:5], y[far][:5])
        else:
            assert np.array_equal(x, y), (what, column, np.flatnonzero(x != y)[:5])


@pytest.mark.parametrize(("workload_args", "knobs", "exercises"), [case[1:] for case in CASES],
                         ids=[case[0] for case in CASES])
def test_engine_and_fused_core_equal_reference_stepper(workload_args, knobs, exercises):
    engine, reference, chosen = run_all(workload_args, knobs)
    assert_same_run(engine, reference)
    assert isinstance(chosen.recorder, FusedRecord)  # simulate ran the fused core
    assert_same_run(chosen, reference)
    summary = summarize(reference)
    assert summary["n_finished"] > 0
    if "preemptions" in exercises:
        assert summary["preemptions"] > 0
    if "rejections" in exercises:
        assert summary["n_rejected"] > 0
    attributed = [column for column in requests_columns(reference) if column.startswith("attr_")]
    assert bool(attributed) == (knobs.get("latency_attribution", True))


def test_arrivals_at_step_ends_give_identical_bits():
    """Constant 1/64 s steps and arrivals on that grid: every float sum is exact, so the two must agree
    bit for bit, and an arrival landing exactly when a step ends joins the next step in both. The
    engine's latency attribution agrees bit for bit too; the fused core's to 1e-12 of the clock, since
    a prefill's own share of a step (step time / prompt tokens) is not exact and the core adds a
    request's parts in another order."""
    rng = np.random.default_rng(11)
    n_preempting = 0
    for _ in range(30):
        arrivals = np.sort(rng.integers(0, 200, 40)) * STEP_S
        rows = [(float(a), int(rng.integers(1, 300)), int(rng.integers(1, 60))) for a in arrivals]
        cfg = EngineConfig(record_steps=True,
                           num_gpu_blocks_override=int(rng.choice([40, 80, 400])),
                           max_num_seqs=int(rng.choice([2, 4, 64])),
                           max_num_batched_tokens=int(rng.choice([300, 1024])),
                           preemption_mode=str(rng.choice(["recompute", "swap"])))
        engine = simulate(cfg, make_trace(rows), cost=ConstantCost(swap_s_per_block=STEP_S / 4), core="engine")
        reference = simulate_reference(cfg, make_trace(rows), cost=ConstantCost(swap_s_per_block=STEP_S / 4))
        fused = simulate(cfg, make_trace(rows), cost=ConstantCost(swap_s_per_block=STEP_S / 4), core="fused")
        assert_same_columns("requests", requests_columns(engine), requests_columns(reference), clock_s=0.0)
        assert_same_fused(fused, reference)
        n_preempting += engine.recorder.preemptions > 0
    assert n_preempting > 0


def assert_same_fused(fused, reference) -> None:
    """The fused core's run of an exact-sum replay: the reference's bit for bit, but its attribution to 1e-12
    of the clock (a prefill's own share of a step is not exact; the core adds a request's parts in
    another order)."""
    fused_columns, reference_columns = requests_columns(fused), requests_columns(reference)
    attributed = [column for column in reference_columns if column.startswith("attr_")]
    assert attributed
    assert_same_columns("requests", {c: v for c, v in fused_columns.items() if c not in attributed},
                        {c: v for c, v in reference_columns.items() if c not in attributed}, clock_s=0.0)
    assert_same_columns("attribution", {c: fused_columns[c] for c in attributed},
                        {c: reference_columns[c] for c in attributed}, clock_s=reference.sim_duration_s)
    assert_same_columns("steps", fused.recorder.steps_columns(), reference.recorder.steps_columns(), clock_s=0.0)


def test_chunked_arrivals_at_step_ends_give_identical_bits():
    """The same exact-sum replays under chunked prefill (budgets that split prompts, a per-request chunk
    cap, mixed steps): the engine and the reference agree bit for bit, attribution included; the fused
    core too, its attribution to 1e-12 of the clock."""
    rng = np.random.default_rng(12)
    n_preempting = n_mixed = 0
    for _ in range(30):
        arrivals = np.sort(rng.integers(0, 200, 40)) * STEP_S
        rows = [(float(a), int(rng.integers(1, 300)), int(rng.integers(1, 60))) for a in arrivals]
        chunk_size = rng.choice([0, 64])
        cfg = EngineConfig(record_steps=True, policy="chunked",
                           num_gpu_blocks_override=int(rng.choice([40, 80, 400])),
                           max_num_seqs=int(rng.choice([2, 4, 64])),
                           max_num_batched_tokens=int(rng.choice([96, 300, 1024])),
                           chunk_size=int(chunk_size) or None,
                           preemption_mode=str(rng.choice(["recompute", "swap"])))
        engine = simulate(cfg, make_trace(rows), cost=ConstantCost(swap_s_per_block=STEP_S / 4))
        reference = simulate_reference(cfg, make_trace(rows), cost=ConstantCost(swap_s_per_block=STEP_S / 4))
        assert_same_columns("requests", requests_columns(engine), requests_columns(reference), clock_s=0.0)
        fused = simulate(cfg, make_trace(rows), cost=ConstantCost(swap_s_per_block=STEP_S / 4), core="fused")
        assert_same_fused(fused, reference)
        steps = reference.recorder.steps_columns()
        engine_steps = engine.recorder.steps_frame()
        assert_same_columns("steps", {c: engine_steps[c].to_numpy() for c in engine_steps.columns}, steps, clock_s=0.0)
        n_mixed += int(((steps["prefill_tokens"] > 0) & (steps["decode_tokens"] > 0)).sum())
        n_preempting += engine.recorder.preemptions > 0
    assert n_preempting > 0 and n_mixed > 0


def test_latency_attribution_leaves_the_schedule_alone():
    """With attribution on (the default) the engine costs single steps through its attribution parts;
    its requests (attribution columns aside) still equal the reference's without attribution."""
    workload = load_run_workload("splitwise_conv", rate_scale=4, max_requests=300)
    cfg = EngineConfig(num_gpu_blocks_override=600)
    engine = requests_columns(simulate(cfg, workload, core="engine"))
    reference_run = simulate_reference(cfg.model_copy(update={"latency_attribution": False}), workload)
    reference = requests_columns(reference_run)
    assert_same_columns("requests", {column: engine[column] for column in reference}, reference,
                        reference_run.sim_duration_s)


def test_reference_refuses_what_it_does_not_model():
    workload = load_run_workload("splitwise_conv", max_requests=10)
    for knobs in ({"policy": "radix"}, {"replicas": 2}, {"spec_tokens": 2}):
        with pytest.raises(ValueError, match="does not cover"):
            simulate_reference(EngineConfig(**{"latency_attribution": False, **knobs}), workload)


def test_fused_core_refuses_what_it_does_not_model():
    workload = load_run_workload("splitwise_conv", max_requests=10)
    for knobs in ({"policy": "radix"}, {"replicas": 2}, {"spec_tokens": 2}):
        with pytest.raises(ValueError, match="does not cover"):
            simulate(EngineConfig(**knobs), workload, core="fused")
        assert isinstance(simulate(EngineConfig(**knobs), workload).recorder, Recorder)  # auto: the engine


def test_default_run_takes_the_fused_core():
    """The defaults (continuous policy, one replica, latency attribution on) run through the fused core,
    and its attribution parts add up to each finished request's end-to-end time."""
    result = simulate(EngineConfig(), load_run_workload("splitwise_conv", rate_scale=4, max_requests=100))
    assert isinstance(result.recorder, FusedRecord)
    columns = requests_columns(result)
    finished = np.isfinite(columns["attr_decode_s"])  # NaN where the request did not finish
    parts_s = sum(columns[name] for name in columns if name.startswith("attr_"))
    assert finished.sum() > 0
    np.testing.assert_allclose(parts_s[finished], columns["e2e_s"][finished], rtol=0, atol=1e-9)
