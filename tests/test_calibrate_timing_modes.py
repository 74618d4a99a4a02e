"""Eager and CUDA-graph timing (issue 39 item 1), the measurements' optional columns, and the
split-KV decode kernel on shapes the selfcheck does not cover (Triton's interpreter on CPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from calibrate import grid as grids
from calibrate.measurements import COLUMNS, read_measurements, split_predicted, validate_measurements
from calibrate.run_state import RunState
from calibrate.timing import graph_l2_state, graph_unavailable_reason, launches_per_replay, time_graph
from kernels import gemm
from sim.errors import InputError

REPO = Path(__file__).resolve().parents[1]
PROVENANCE = {"device": "cpu", "source": "test", "torch_version": "", "date": "2026-12-04T00:00:00+00:00"}


def _row(**fields) -> dict:
    base = dict.fromkeys(COLUMNS) | PROVENANCE
    base.update(op="qkv_proj", m_tokens=1, n_out=64, k_in=32, tp=1, dtype="bf16", time_s=1e-5, time_std_s=0.0,
                n_repeats=3)  # fmt: skip
    return base | fields


def test_a_file_without_the_new_columns_reads_with_them_empty(tmp_path):
    path = tmp_path / "old.csv"
    pd.DataFrame([_row()], columns=list(COLUMNS)).to_csv(path, index=False)
    frame = read_measurements(path)
    assert frame["timing_mode"].isna().all() and frame["time_graph_s"].isna().all()


@pytest.mark.parametrize("fields,column", [
    ({"timing_mode": "graph"}, "timing_mode"),
    ({"kernel": "cutlass"}, "kernel"),
    ({"time_graph_s": -1.0}, "time_graph_s"),
    ({"op": "experts_down"}, "n_experts"),  # a grouped row must say how many experts
    ({"op": "mla_decode_attention", "n_out": None, "k_in": None, "batch_size": 1, "context_tokens": 8.0,
      "block_size": 16, "n_heads": 4, "n_kv_heads": 1, "head_dim": 80}, "v_head_dim"),
])  # fmt: skip
def test_bad_optional_fields_are_refused_naming_the_column(fields, column):
    with pytest.raises(InputError) as error:
        validate_measurements(pd.DataFrame([_row(**fields)]), "m.csv")
    assert error.value.field == column


def test_grouped_and_mla_rows_are_kept_but_left_out_of_fits():
    rows = [_row(), _row(op="experts_down", n_experts=4), _row(op="experts_down", n_experts=8)]
    frame = validate_measurements(pd.DataFrame(rows), "m.csv")
    kept, left_out = split_predicted(frame)
    assert list(kept["op"]) == ["qkv_proj"] and left_out == {"experts_down": 2}


def test_launches_per_replay_aims_at_the_target_within_bounds():
    assert launches_per_replay(36e-6, 2e-3, 32) == 32  # a small GEMM: the cap
    assert launches_per_replay(500e-6, 2e-3, 32) == 4
    assert launches_per_replay(10e-3, 2e-3, 32) == 1
    with pytest.raises(ValueError):
        launches_per_replay(0.0, 2e-3, 32)


def test_graph_l2_state_and_cpu_refusal():
    assert graph_l2_state(4, 64 * 2**20, "cpu") == "rotated"
    assert graph_l2_state(1, 2**20, "cpu") == "warm"
    assert "needs a CUDA device" in graph_unavailable_reason("cpu") and graph_unavailable_reason("cuda") is None
    with pytest.raises(ValueError):
        time_graph(gemm.projection, [None], "cpu", 4, 3)


def test_cpu_point_is_eager_with_both_columns_filled():
    run = RunState("cpu", "fp32", grids.cpu_quick_grid(), None, PROVENANCE)
    timing = run.measure(lambda: gemm.make_gemm_inputs(4, 32, 16, torch.float32, "cpu"), 4096, gemm.projection, "x")
    assert timing["timing_mode"] == "eager" and "time_graph_s" not in timing
    assert timing["time_s"] == timing["time_eager_s"] > 0 and timing["l2_state_eager"] in ("rotated", "warm")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_graph_replay_of_a_small_gemm_is_not_slower_than_eager():
    """A decode-sized GEMM (M = 1): eager calls carry launch gaps a graph replay removes."""
    run = RunState("cuda", "bf16", grids.quick_grid(), None, PROVENANCE | {"device": "gpu"})
    timing = run.measure(lambda: gemm.make_gemm_inputs(1, 3584, 4096, torch.bfloat16, "cuda"),
                         gemm.gemm_bytes(1, 3584, 4096, torch.bfloat16), gemm.projection, "gemv")
    assert timing["timing_mode"] == "cuda_graph" and timing["graph_launches"] >= 1
    assert timing["time_graph_s"] <= timing["time_eager_s"] * 1.05


SPLIT_KV_CASES = """
import json, torch
from kernels import paged_attention as pa, paged_attention_triton as pat
from kernels.selfcheck import _dense_case, relative_error
generator = torch.Generator().manual_seed(7)
errors = {}
for n_heads, n_kv, head_dim in ((16, 2, 80), (2, 2, 32)):  # a group of 8 and an odd head dim; plain MHA
    q, k_seqs, v_seqs = _dense_case((1, 70, 33), n_heads, n_kv, head_dim, torch.float32, generator)
    dense = pa.dense_decode_attention(q, k_seqs, v_seqs, head_dim**-0.5)
    for block_size in (8, 128):
        batch = pa.paged_batch_from_dense(q, k_seqs, v_seqs, block_size, generator)
        for n_splits in (1, 2, 5):
            out = pat.paged_decode_attention_triton(batch, head_dim**-0.5, out=torch.full_like(q, float("nan")),
                                                    n_splits=n_splits)
            errors[f"{n_heads}/{n_kv}x{head_dim} block {block_size} splits {n_splits}"] = relative_error(out, dense)
print(json.dumps(errors))
"""


@pytest.mark.skipif(not __import__("kernels.paged_attention_triton").paged_attention_triton.triton_available(),
                    reason="Triton is not installed")
def test_split_kv_kernel_matches_dense_for_wide_groups_and_odd_head_dims():
    env = dict(os.environ, TRITON_INTERPRET="1")
    completed = subprocess.run([sys.executable, "-c", SPLIT_KV_CASES], cwd=REPO, env=env, capture_output=True,
                               text=True, timeout=300, check=False)  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-2000:]
    errors = json.loads(completed.stdout)
    assert len(errors) == 12 and max(errors.values()) < 1e-5, errors


BENCH_SMOKE = """
import json, sys
sys.path.insert(0, "bench")
from bench_decode_kernel import PROVENANCE, point
from calibrate import grid as grids
from calibrate.run_state import RunState
run = RunState("cpu", "fp32", grids.cpu_quick_grid(), None, PROVENANCE)
print(json.dumps([point(run, layout, 2, 40, 16) for layout in ((4, 2, 32, None), (4, 1, 32, 16))]))
"""


@pytest.mark.skipif(not __import__("kernels.paged_attention_triton").paged_attention_triton.triton_available(),
                    reason="Triton is not installed")
def test_decode_bandwidth_bench_points_run_in_the_interpreter():
    """The GPU bench's per-point code (check, time, bytes) on CPU, so a GPU session does not find its bugs."""
    env = dict(os.environ, TRITON_INTERPRET="1")
    completed = subprocess.run([sys.executable, "-c", BENCH_SMOKE], cwd=REPO, env=env, capture_output=True,
                               text=True, timeout=300, check=False)  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-2000:]
    gqa, mla = json.loads(completed.stdout)
    assert gqa["kv_bytes"] == 2 * 40 * 2 * 2 * 32 * 4 and mla["kv_bytes"] == 2 * 40 * (32 + 16) * 4
    assert max(gqa["rel_error"], mla["rel_error"]) < 1e-5 and gqa["timing_mode"] == "eager"
