"""Calibration runner (quick CPU run), timing helpers and the measurements CSV schema."""

import dataclasses
import math

import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from calibrate import grid as grids
from calibrate.measurements import COLUMNS, OPTIONAL_COLUMNS, read_measurements, write_measurements
from calibrate.runner import run_calibration
from calibrate.timing import n_copies_to_rotate, time_op
from kernels.shapes import TOY_DIMS, shapes_for
from sim.errors import InputError
from sim.inputs.hardware import load_hardware


@pytest.fixture(scope="module")
def quick_cpu_run():
    return run_calibration("cpu", [], quick=True, dtype="fp32")


def test_quick_cpu_run_covers_every_op_and_grid_point(quick_cpu_run):
    frame, grid = quick_cpu_run, grids.cpu_quick_grid()
    assert list(frame.columns) == list(COLUMNS + OPTIONAL_COLUMNS)
    counts = frame["op"].value_counts().to_dict()
    n_m = len(grid.m_tokens) * len(grid.tps)
    for op in ("qkv_proj", "o_proj", "gate_up_proj", "down_proj", "lm_head"):
        assert counts[op] == n_m
    assert counts["decode_attention"] == len(grid.decode_points()) * len(grid.tps)
    assert counts["prefill_attention"] == len(grid.prefill_points()) * len(grid.tps)
    assert "allreduce" not in counts  # one CPU: not measured
    assert set(frame["block_size"].dropna()) == set(grid.block_sizes)
    assert (frame["time_s"] > 0).all() and (frame["device"] == "cpu").all()
    assert (frame["source"] == "infersim-runner").all() and (frame["dtype"] == "fp32").all()


def test_quick_cpu_run_gemm_shapes_are_the_toy_model_shards(quick_cpu_run):
    gemms = quick_cpu_run.dropna(subset=["n_out"])
    measured = set(zip(gemms["op"], gemms["tp"], gemms["n_out"], gemms["k_in"]))
    expected = {(s.op, tp, s.n_out, s.k_in) for tp in (1, 2) for s in shapes_for(TOY_DIMS, tp)}
    assert measured == expected


def test_quick_cpu_run_round_trips_through_csv(quick_cpu_run, tmp_path):
    path = write_measurements(quick_cpu_run, tmp_path / "m.csv")
    back = read_measurements(path)
    pd.testing.assert_frame_equal(back, quick_cpu_run)
    assert not list(tmp_path.glob(".*.tmp"))


def test_time_budget_skips_points():
    with pytest.raises(InputError, match="--time-budget-s: 0 s ran out before the first point was timed"):
        run_calibration("cpu", [], quick=True, dtype="fp32", time_budget_s=0.0)


@pytest.mark.parametrize("device,dtype", [("tpu", "fp32"), ("cpu", "int8")])
def test_bad_device_or_dtype(device, dtype):
    with pytest.raises(InputError):
        run_calibration(device, [], quick=True, dtype=dtype)


def test_time_op_warms_up_then_cycles_inputs():
    calls = []
    timing = time_op(calls.append, ["a", "b", "c"], "cpu", n_warmup=2, n_repeats=4)
    assert calls == ["a", "b", "c", "a", "b", "c"]
    assert timing.n_repeats == 4 and timing.time_s >= 0 and timing.time_std_s >= 0


def test_rotation_overflows_the_cache_within_limits():
    cache = 64 * 2**20  # the CPU assumption in calibrate.timing
    assert n_copies_to_rotate(cache, "cpu", 10 * cache, 32) == 2
    assert n_copies_to_rotate(cache // 8, "cpu", 10 * cache, 32) == 16
    assert n_copies_to_rotate(cache // 8, "cpu", cache, 32) == 8  # memory budget wins
    assert n_copies_to_rotate(1024, "cpu", 10 * cache, 32) == 32  # copy cap wins
    assert n_copies_to_rotate(4 * cache, "cpu", cache, 32) == 1


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_quick_gpu_run_is_valid(tmp_path):
    frame = run_calibration("cuda", [TOY_DIMS], quick=True, dtype="bf16")
    read_measurements(write_measurements(frame, tmp_path / "m.csv"))
    assert (frame["device"] != "cpu").all()


# ---- bad measurement files -------------------------------------------------------------


def _good_rows() -> pd.DataFrame:
    base = dict.fromkeys(COLUMNS)
    base.update(tp=1, dtype="bf16", time_s=1e-4, time_std_s=1e-6, n_repeats=10,
                device="NVIDIA H200", source="test", torch_version="2.5.1",
                date="2026-11-30T12:00:00+00:00")  # fmt: skip
    gemm = dict(base, op="qkv_proj", m_tokens=16, n_out=6144, k_in=4096)
    decode = dict(base, op="decode_attention", m_tokens=8, batch_size=8, context_tokens=512.0,
                  block_size=16, n_heads=32, n_kv_heads=8, head_dim=128)  # fmt: skip
    allreduce = dict(base, op="allreduce", payload_bytes=1 << 20, tp=2)
    return pd.DataFrame([gemm, decode, allreduce], columns=list(COLUMNS))


def _write(tmp_path, frame) -> str:
    path = tmp_path / "bad.csv"
    frame.to_csv(path, index=False)
    return str(path)


def test_good_rows_read(tmp_path):
    assert len(read_measurements(_write(tmp_path, _good_rows()))) == 3


@pytest.mark.parametrize(
    "column,row,value",
    [
        ("time_s", 0, -1e-3),
        ("time_s", 1, math.nan),
        ("time_s", 2, math.inf),
        ("time_s", 0, "fast"),
        ("op", 0, "softmax"),
        ("dtype", 1, "int4"),
        ("n_out", 0, math.nan),  # a GEMM needs its N
        ("block_size", 1, 0),  # decode needs a positive block size
        ("block_size", 0, 16),  # GEMMs have no block size
        ("tp", 2, 1),  # all-reduce across one rank
        ("m_tokens", 0, 1.5),
        ("date", 0, "yesterday"),
        ("device", 0, ""),
    ],
)
def test_bad_value_names_the_column(tmp_path, column, row, value):
    frame = _good_rows().astype(object)
    frame.loc[row, column] = value
    path = _write(tmp_path, frame)
    with pytest.raises(InputError) as error:
        read_measurements(path)
    assert (error.value.where, error.value.field) == (path, column)


def test_missing_column(tmp_path):
    path = _write(tmp_path, _good_rows().drop(columns=["time_s"]))
    with pytest.raises(InputError) as error:
        read_measurements(path)
    assert error.value.field == "time_s"


@pytest.mark.parametrize(
    "content",
    [b"", b"\xff\xfe\x00garbage\x81\x9f" * 50, ",".join(COLUMNS).encode() + b"\n", b"a,b\n1,2\n"],
    ids=["empty", "garbage-bytes", "header-only", "other-csv"],
)
def test_unreadable_files(tmp_path, content):
    path = tmp_path / "bad.csv"
    path.write_bytes(content)
    with pytest.raises(InputError) as error:
        read_measurements(path)
    assert error.value.where == str(path)


def test_missing_file(tmp_path):
    with pytest.raises(InputError):
        read_measurements(tmp_path / "nope.csv")


def test_write_refuses_bad_frames_and_keeps_old_file(tmp_path):
    path = tmp_path / "m.csv"
    write_measurements(_good_rows(), path)
    before = path.read_bytes()
    bad = _good_rows()
    bad.loc[0, "time_s"] = -1.0
    with pytest.raises(InputError):
        write_measurements(bad, path)
    assert path.read_bytes() == before


def test_fp8_gemms_time_scaled_mm_on_cpu_and_fit():
    """fp8 runs time the GEMMs only (torch._scaled_mm, M padded to 16) and fit at the fp8 peak."""
    if not hasattr(torch, "_scaled_mm"):
        pytest.skip("this torch has no _scaled_mm")
    from calibrate.fit import fit_profile
    from kernels import gemm

    inputs = gemm.make_fp8_gemm_inputs(5, 32, 64, "cpu")
    out = gemm.fp8_projection(inputs)
    ref = inputs.x.float() @ inputs.weight.float().t()
    assert out.shape == (16, 32) and torch.allclose(out.float(), ref, rtol=2e-2, atol=2e-1)
    # torch's CPU _scaled_mm is slow (~5 min over the whole quick grid here): three M values are enough
    # to check fp8 timing and the fit (tables need >= 2 M per shape)
    small = dataclasses.replace(grids.cpu_quick_grid(), m_tokens=(1, 4, 16))
    frame = run_calibration("cpu", [], quick=True, dtype="fp8", grid=small)
    assert set(frame["op"]) <= {"qkv_proj", "o_proj", "gate_up_proj", "down_proj", "lm_head"}
    assert (frame["dtype"] == "fp8").all() and (frame["time_s"] > 0).all()
    fit = fit_profile(frame, load_hardware("h100-sxm"))
    assert fit.classes[0].name == "gemm" and fit.tables and fit.tables[0]["bytes_per_el"] == 1
