"""The hot loop's fast paths must give exactly what the general paths give, bit for bit.

- Steps and decode runs of few sequences are costed, committed and attributed in plain Python
  (`SCALAR_MAX_SEQS`, `SCALAR_RUN_MAX_SEQS`, `SCALAR_COMMIT_MAX_SEQS`, `SCALAR_MAX_ROWS`); forcing
  every step through numpy (thresholds 0) or through Python (thresholds huge) must not change a
  single bit of the requests frame, the steps table or the summary, for every policy and the
  preemption paths.
- Decode-run block arithmetic (residue counts) against brute force.
- Memory-bounded chunking (synthetic hash ids, Trace.take, canonical JSONL) against one chunk.
- Gap compaction keeps the ITL percentiles and maximum exactly and the mean to rounding.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import sim.cost.block_residues as residues
import sim.cost.hot as hot
import sim.cost.runs_past_finishes as runs_past
import sim.engine.metrics as metrics
import sim.engine.sched.base as sched_base
import sim.engine.sched.commit as sched_commit
import sim.engine.sched.decode_runs as decode_runs
import sim.inputs.workload.canonical as canonical
import sim.inputs.workload.synthetic.prefix_ids as prefix_ids
import sim.inputs.workload.trace as trace_mod
import sim.run.attribution as attribution
import sim.run.attribution_split as attribution_split
from sim.cost import CostModel
from sim.engine.kv.blocks import BlockManager
from sim.inputs.config import EngineConfig
from sim.inputs.hardware import load_hardware
from sim.inputs.model import load_model
from sim.inputs.workload import load_workload
from sim.run.invoke import load_run_workload
from sim.run.simulate import simulate
from sim.run.summary import requests_frame, summarize


@pytest.fixture(scope="module")
def splitwise():
    return load_run_workload("splitwise_conv", rate_scale=4, max_requests=300)


@pytest.fixture(scope="module")
def mooncake():
    return load_run_workload("mooncake_conversation", rate_scale=0.25, max_requests=80)


def outputs(cfg: EngineConfig, workload):
    result = simulate(cfg.model_copy(update={"record_steps": True}), workload, core="engine")
    summary = summarize(result)
    summary.pop("wall_time_s")
    return requests_frame(result), result.recorder.steps_frame(), summary


def set_thresholds(monkeypatch, n_seqs: int, histogram_loop_seqs: int | None = None) -> None:
    """Every fast-path threshold to `n_seqs` (a decode run's residue histogram: `histogram_loop_seqs`)."""
    histogram = n_seqs if histogram_loop_seqs is None else histogram_loop_seqs
    monkeypatch.setattr(residues, "HISTOGRAM_LOOP_MAX_SEQS", histogram)
    monkeypatch.setattr(runs_past, "HISTOGRAM_LOOP_MAX_SEQS", histogram)
    monkeypatch.setattr(hot, "SCALAR_MAX_SEQS", n_seqs)
    monkeypatch.setattr(sched_base, "SCALAR_MAX_SEQS", n_seqs)
    monkeypatch.setattr(decode_runs, "SCALAR_RUN_MAX_SEQS", n_seqs)
    monkeypatch.setattr(decode_runs, "SCALAR_GROW_MAX_SEQS", n_seqs)
    monkeypatch.setattr(sched_commit, "SCALAR_COMMIT_MAX_SEQS", n_seqs)
    monkeypatch.setattr(sched_commit, "FEW_FINISHED", n_seqs)
    monkeypatch.setattr(metrics, "RUNNING_SUM_LOOP_MAX", n_seqs)
    monkeypatch.setattr(attribution, "SCALAR_MAX_ROWS", n_seqs)
    monkeypatch.setattr(attribution, "FEW_ROWS", n_seqs)
    monkeypatch.setattr(attribution_split, "FEW_ROWS", n_seqs)


def assert_identical(left, right) -> None:
    (frame, steps, summary), (frame_2, steps_2, summary_2) = left, right
    for a, b in ((frame, frame_2), (steps, steps_2)):
        assert list(a.columns) == list(b.columns) and len(a) == len(b)
        for column in a.columns:
            x, y = a[column].to_numpy(), b[column].to_numpy()
            if x.dtype.kind == "f":
                assert np.array_equal(x, y, equal_nan=True), column  # bit for bit, not approx
            else:
                assert a[column].equals(b[column]), column
    assert summary == summary_2


CASES = [
    ("continuous", {}),
    ("continuous", {"num_gpu_blocks_override": 600}),
    ("continuous", {"num_gpu_blocks_override": 600, "preemption_mode": "swap"}),
    ("chunked", {"num_gpu_blocks_override": 600, "chunk_size": 256}),
    ("static", {"max_num_seqs": 8}),
    ("continuous", {"replicas": 2, "router": "least_outstanding", "num_gpu_blocks_override": 400}),
]


@pytest.mark.parametrize(("policy", "knobs"), CASES)
def test_scalar_and_array_paths_agree_bit_for_bit(splitwise, monkeypatch, policy, knobs):
    cfg = EngineConfig(policy=policy, **knobs)
    default = outputs(cfg, splitwise)
    set_thresholds(monkeypatch, 0)
    arrays_only = outputs(cfg, splitwise)
    set_thresholds(monkeypatch, 1_000_000)
    scalars_only = outputs(cfg, splitwise)
    set_thresholds(monkeypatch, 1_000_000, histogram_loop_seqs=0)
    scalar_runs_numpy_histograms = outputs(cfg, splitwise)
    assert_identical(default, arrays_only)
    assert_identical(default, scalars_only)
    assert_identical(default, scalar_runs_numpy_histograms)
    assert default[2]["n_finished"] + default[2]["n_rejected"] == 300


def test_radix_scalar_and_array_paths_agree(mooncake, monkeypatch):
    cfg = EngineConfig(policy="radix", max_model_len=131072, num_gpu_blocks_override=4000, preemption_mode="swap")
    default = outputs(cfg, mooncake)
    set_thresholds(monkeypatch, 0)
    assert_identical(default, outputs(cfg, mooncake))
    assert default[2]["prefix_hit_rate"] > 0


def test_step_time_scalar_equals_array_formula():
    cost = CostModel(load_model("llama-3-8b"), load_hardware("h100-sxm"))
    rng = np.random.default_rng(7)
    for _ in range(300):
        n = int(rng.integers(1, 12))
        q = rng.choice([0, 1, 1, 1, int(rng.integers(2, 3000))], size=n).astype(np.int64)
        c = rng.integers(0, 9000, size=n).astype(np.int64)
        n_sampled = int(rng.integers(0, n + 1))
        scalar = cost._hot.step_time_s_scalar(q.tolist(), c.tolist(), n_sampled)
        hot_path = cost._hot
        saved, hot.SCALAR_MAX_SEQS = hot.SCALAR_MAX_SEQS, 0
        try:
            array = hot_path.step_time_s(q, c, n_sampled)
        finally:
            hot.SCALAR_MAX_SEQS = saved
        assert scalar == array
        assert math.isclose(scalar, cost.breakdown(q, c, n_sampled).time_s, rel_tol=1e-9)


def test_residue_histogram_loop_equals_numpy():
    rng = np.random.default_rng(5)
    for size in (1, 16, 32):
        for n in (1, 5, 40, 300):
            contexts = rng.integers(0, 20_000, size=n).astype(np.int64)
            by_numpy = residues.residue_histogram(contexts, size) if n > residues.HISTOGRAM_LOOP_MAX_SEQS else None
            by_loop = residues.residue_histogram(contexts.tolist(), size)
            counts, held = residues.residue_counts(contexts, size)
            assert by_loop == (int(contexts.sum()), counts.tolist(), held)
            assert by_numpy in (None, by_loop)


def test_block_counts_from_residues_match_brute_force():
    rng = np.random.default_rng(3)
    for size in (1, 4, 16):
        for _ in range(50):
            contexts = rng.integers(0, 200, size=int(rng.integers(1, 20))).astype(np.int64)
            counts, held = residues.residue_counts(contexts, size)
            assert held == int((-(-contexts // size)).sum())
            for k in (1, 2, size, size + 1, 3 * size + 2):
                brute = int((-(-(contexts + k) // size) - (-(-contexts // size))).sum())
                assert residues.blocks_for_steps(counts.tolist(), contexts.shape[0], k) == brute
                per_step = residues.whole_block_tokens_per_step(contexts, k, size)
                expected = [(-(-(contexts + s + 1) // size) * size).sum() for s in range(k)]
                assert per_step.tolist() == expected


def test_grow_by_hands_out_the_same_blocks_as_grow_many():
    a, b = BlockManager(100, 4), BlockManager(100, 4)
    for manager in (a, b):
        for rid, tokens in ((0, 5), (1, 8), (2, 1)):
            manager.grow(rid, tokens)
        manager.free_request(1)
    a.grow_many([0, 2, 3], [9, 9, 2])
    b.grow_by([0, 2, 3], [1, 2, 1])
    assert [a.table(r) for r in range(4)] == [b.table(r) for r in range(4)]
    a.grow_many([0, 3], [13, 5])
    b.grow_by([0, 3], 1)
    assert [a.table(r) for r in range(4)] == [b.table(r) for r in range(4)]


def test_synthetic_hash_ids_are_the_same_in_small_chunks(monkeypatch):
    whole = load_workload("workloads/multiturn_chat.yaml", seed=0)
    monkeypatch.setattr(prefix_ids, "IDS_PER_CHUNK", 97)
    chunked = load_workload("workloads/multiturn_chat.yaml", seed=0)
    assert np.array_equal(whole.hash_ids_flat, chunked.hash_ids_flat)
    assert np.array_equal(whole.hash_offsets, chunked.hash_offsets)
    assert whole.hash_ids_flat.dtype == np.int32  # compact when the ids fit


def test_take_in_chunks_and_contiguous_cuts_match_row_by_row(monkeypatch):
    workload = load_workload("workloads/system_prompts.yaml", seed=0)
    monkeypatch.setattr(trace_mod, "TAKE_IDS_PER_CHUNK", 50)
    index = np.random.default_rng(1).permutation(len(workload))[:400]
    for rows in (index, np.arange(25, 700)):
        taken = workload.take(rows)
        assert all(np.array_equal(taken.hash_ids(i), workload.hash_ids(r)) for i, r in enumerate(rows.tolist()))
        assert taken.hash_offsets[0] == 0 and taken.hash_offsets[-1] == taken.hash_ids_flat.shape[0]


def test_canonical_jsonl_is_the_same_written_in_chunks(tmp_path, monkeypatch):
    workload = load_workload("workloads/system_prompts.yaml", seed=0)
    canonical.write_canonical_jsonl(workload, tmp_path / "one.jsonl")
    monkeypatch.setattr(canonical, "ROWS_PER_CHUNK", 7)
    canonical.write_canonical_jsonl(workload, tmp_path / "rows.jsonl")
    monkeypatch.setattr(canonical, "IDS_PER_CHUNK", 50)
    canonical.write_canonical_jsonl(workload, tmp_path / "ids.jsonl")
    one = (tmp_path / "one.jsonl").read_bytes()
    assert one == (tmp_path / "rows.jsonl").read_bytes() == (tmp_path / "ids.jsonl").read_bytes()


def test_gap_compaction_keeps_itl_percentiles_and_max(splitwise, monkeypatch):
    cfg = EngineConfig(policy="continuous")
    plain_result = simulate(cfg, splitwise, core="engine")
    plain = summarize(plain_result)["itl_s"]
    monkeypatch.setattr(metrics, "GAP_COMPACT_AT", 64)
    result = simulate(cfg, splitwise, core="engine")
    compacted = summarize(result)["itl_s"]
    assert result.recorder.gap_values.size < 0.5 * plain_result.recorder.gap_values.size  # it really merged
    for stat in ("p50", "p90", "p99", "max"):
        assert compacted[stat] == plain[stat], stat
    assert compacted["mean"] == pytest.approx(plain["mean"], rel=1e-12)


def test_a_clusters_parts_are_compacted_before_merging(splitwise, monkeypatch):
    """Each replica's gaps are compacted before its cluster merges them (and a worker may compact
    first: twice changes nothing); the ITL percentiles and max stay those of the raw samples."""
    cfg = EngineConfig(policy="continuous", replicas=3, router="round_robin")
    monkeypatch.setattr(metrics, "MIN_REPLICA_GAP_COMPACT_AT", 10**9)  # never: the raw samples
    raw_result = simulate(cfg, splitwise)
    raw = summarize(raw_result)["itl_s"]
    monkeypatch.setattr(metrics, "MIN_REPLICA_GAP_COMPACT_AT", 16)
    result = simulate(cfg, splitwise)
    merged = result.recorder
    assert merged.gap_values.size < 0.5 * raw_result.recorder.gap_values.size  # it really compacted
    assert int(merged.gap_weights.array().sum()) == int(raw_result.recorder.gap_weights.array().sum())
    compacted = summarize(result)["itl_s"]
    for stat in ("p50", "p90", "p99", "max"):
        assert compacted[stat] == raw[stat], stat
    assert compacted["mean"] == pytest.approx(raw["mean"], rel=1e-12)
    values, weights = merged.gap_values.array().copy(), merged.gap_weights.array().copy()
    merged.compact_gaps()
    assert merged.gap_values.size < values.size  # the parts' values overlap; within a part none repeat
    part = metrics.Recorder(False)
    part.gap_values.extend(values[:100])
    part.gap_weights.extend(weights[:100])
    part.compact_gaps()
    again = (part.gap_values.array().copy(), part.gap_weights.array().copy())
    part.compact_gaps()
    assert np.array_equal(part.gap_values.array(), again[0]) and np.array_equal(part.gap_weights.array(), again[1])
