"""The fitter, importer and prediction on Vidur's bundled H100 data and on synthetic rows (no torch)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibrate.fit import fit_profile, with_terms
from calibrate.measurements import COLUMNS, validate_measurements
from calibrate.predict import predict_times_s
from calibrate.report import mape_summary, residual_rows
from calibrate.vidur_import import bundled_vidur_path, read_measurement_file
from sim.cost.roofline import gemm_compute_efficiency, gemm_time_s
from sim.inputs.hardware import load_hardware

MLP = {
    "llama-2-7b": "compute/h100/meta-llama/Llama-2-7b-hf/mlp.csv",
    "llama-2-70b": "compute/h100/meta-llama/Llama-2-70b-hf/mlp.csv",
    "codellama-34b": "compute/h100/codellama/CodeLlama-34b-Instruct-hf/mlp.csv",
}
GEMM_OPS = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")


@pytest.fixture(scope="module")
def vidur_gemms() -> dict[str, pd.DataFrame]:
    return {model: read_measurement_file(bundled_vidur_path(rel)) for model, rel in MLP.items()}


@pytest.fixture(scope="module")
def fitted_on_7b(vidur_gemms):
    return fit_profile(vidur_gemms["llama-2-7b"], load_hardware("h100-sxm"))


def per_op_mape(frame, hw) -> dict[str, float]:
    return {op: v["mape"] for op, v in mape_summary(residual_rows(frame, hw))["per_op"].items()}


def test_importer_shapes_units_and_duplicates(vidur_gemms):
    frame = vidur_gemms["llama-2-70b"]
    raw = pd.read_csv(bundled_vidur_path(MLP["llama-2-70b"]))
    keys = ["num_tokens", "num_tensor_parallel_workers"]
    assert len(raw) == 1044 and raw.duplicated(keys).sum() == 8  # 8 (M, TP) keys measured twice
    assert len(frame) == 4 * (1044 - 8)  # four GEMMs per key; repeats merged into their median
    assert not frame.duplicated(["op", "m_tokens", "tp"]).any()
    repeated = raw[raw.duplicated(keys, keep=False)].groupby(keys)["time_stats.mlp_down_proj.median"].median()
    (m, tp), median_ms = next(iter(repeated.items()))
    row = frame[(frame["op"] == "down_proj") & (frame["m_tokens"] == m) & (frame["tp"] == tp)]
    assert row["time_s"].astype(float).iloc[0] == pytest.approx(median_ms * 1e-3)
    tp8 = frame[(frame["tp"] == 8) & (frame["m_tokens"] == 4096)].drop_duplicates("op").set_index("op")
    # 64 q heads, 8 kv heads, head_dim 128, MLP 28672, TP 8: one kv head per shard
    assert (tp8.loc["qkv_proj", "n_out"], tp8.loc["qkv_proj", "k_in"]) == ((8 + 2) * 128, 8192)
    assert (tp8.loc["o_proj", "n_out"], tp8.loc["o_proj", "k_in"]) == (8192, 1024)
    assert (tp8.loc["gate_up_proj", "n_out"], tp8.loc["down_proj", "k_in"]) == (2 * 3584, 3584)
    tp1 = vidur_gemms["llama-2-7b"]
    first = tp1[(tp1["tp"] == 1) & (tp1["m_tokens"] == 4096) & (tp1["op"] == "qkv_proj")]
    # CSV rows 1 and 2 both measure (M=4096, TP 1): 0.584 and 0.593 ms; the median of the two
    assert first["time_s"].astype(float).iloc[0] == pytest.approx(0.5885e-3)


def test_gemm_fit_on_7b_beats_default_in_and_out_of_sample(vidur_gemms, fitted_on_7b):
    """Fit on Llama-2-7B only. Measured (bench/bench_calibration_vidur.py): in-sample 7.2-8.3%
    per op; held out (70B, 34B) qkv 9.4/8.9, o 10.1/9.8, gate_up 8.1/7.6, down 12.5/12.3 %.
    The issue's targets (5% in-sample, 10% held-out per op) are NOT all met: see the bench."""
    base = _starting_guess()
    fitted = fitted_on_7b.hardware
    in_sample = per_op_mape(vidur_gemms["llama-2-7b"], fitted)
    assert max(in_sample.values()) < 0.09
    for model in ("llama-2-70b", "codellama-34b"):
        held_out = per_op_mape(vidur_gemms[model], fitted)
        default = per_op_mape(vidur_gemms[model], base)
        assert held_out["qkv_proj"] < 0.10 and held_out["gate_up_proj"] < 0.09
        assert held_out["o_proj"] < 0.105 and held_out["down_proj"] < 0.13
        assert np.mean(list(held_out.values())) < np.mean(list(default.values())) - 0.02


def _starting_guess():
    """h100-sxm with the team's unfitted starting guesses (the bundled profile is now fitted on
    all H100 data, Llama-2-70B included, so it is no fair 'before')."""
    guess = {"gemm_compute_max": 0.72, "gemm_half_tokens": 24, "memory": 0.85, "roofline_blend": 8.0,
             "kernel_launch_us": 3.0, "gemm_tile_tokens": None}  # fmt: skip
    return with_terms(load_hardware("h100-sxm"), guess).model_copy(update={"collectives": None})


def test_allreduce_fit_predicts_held_out_sizes():
    frame = read_measurement_file(bundled_vidur_path("network/h100_dgx/all_reduce.csv"))
    sizes = np.sort(frame["payload_bytes"].astype("int64").unique())
    base = load_hardware("h100-sxm")
    for chosen in (sizes[::2], sizes[: len(sizes) // 2]):
        mask = frame["payload_bytes"].astype("int64").isin(set(chosen))
        fit = fit_profile(frame[mask].reset_index(drop=True), base)
        held_out = residual_rows(frame[~mask].reset_index(drop=True), fit.hardware)
        assert held_out["ape"].mean() < 0.15
        assert fit.hardware.efficiency.gemm_compute_max == base.efficiency.gemm_compute_max
        assert {"gemm_compute_max", "attention_compute", "step_overhead_us"} <= set(fit.kept)


def _synthetic_rows() -> pd.DataFrame:
    """Decode (two block sizes), prefill and all-reduce rows; times filled in by the caller."""
    rows = []
    common = {"dtype": "bf16", "time_std_s": 0.0, "n_repeats": 3, "device": "synthetic", "source": "test",
              "date": "2026-01-01", "tp": 1, "n_heads": 8, "n_kv_heads": 2, "head_dim": 128}  # fmt: skip
    for block in (16, 64):
        for batch in (1, 8, 64):
            for context in (100, 1000, 5000):
                rows.append(common | {"op": "decode_attention", "m_tokens": batch, "batch_size": batch,
                                      "context_tokens": context, "block_size": block})  # fmt: skip
    for batch, seq in ((1, 512), (2, 2048), (1, 8192)):
        rows.append(common | {"op": "prefill_attention", "m_tokens": batch * seq, "batch_size": batch,
                              "context_tokens": seq})  # fmt: skip
    for tp in (2, 8):
        for size in (2**12, 2**18, 2**24, 2**27):
            rows.append({k: common[k] for k in ("dtype", "time_std_s", "n_repeats", "device", "source", "date")}
                        | {"op": "allreduce", "payload_bytes": size, "tp": tp})  # fmt: skip
    frame = pd.DataFrame(rows).reindex(columns=list(COLUMNS))
    frame["time_s"] = 1.0
    return validate_measurements(frame, "synthetic")


def test_fit_recovers_known_attention_and_allreduce_terms():
    # truth: the ring formula (no fits, no measured all-reduce tables)
    base = load_hardware("h100-sxm").model_copy(update={"collectives": None, "calibration": None})
    truth = with_terms(base, {
        "attention_compute": 0.31, "paged_attention_memory": {16: 0.52, 64: 0.66},
        "allreduce_bus": 0.6, "gpu_link_latency_us": 17.0,
    })  # fmt: skip
    frame = _synthetic_rows()
    frame["time_s"] = predict_times_s(frame, truth)
    fit = fit_profile(frame, base)
    eff = fit.hardware.efficiency
    assert eff.attention_compute == pytest.approx(0.31, rel=1e-3)
    assert eff.paged_attention_memory[16] == pytest.approx(0.52, rel=1e-3)
    assert eff.paged_attention_memory[64] == pytest.approx(0.66, rel=1e-3)
    assert eff.paged_attention_memory[128] == base.efficiency.paged_attention_memory[128]  # not measured
    # the ring formula is latency + payload * 2 (tp - 1) / tp / (link * bus): one line per TP
    nccl = fit.hardware.collectives.allreduce["nccl"]
    for tp in (2, 8):
        assert nccl[tp].latency_us == pytest.approx(17.0, rel=1e-3)
        assert nccl[tp].bus_gb_s == pytest.approx(450 * 0.6 * tp / (2 * (tp - 1)), rel=1e-3)
    assert "paged_attention_memory.128" in fit.kept and "gemm_compute_max" in fit.kept
    assert residual_rows(frame, fit.hardware)["ape"].max() < 1e-3


@settings(max_examples=60, deadline=None)
@given(
    m_tokens=st.integers(1, 20000),
    n_out=st.integers(1, 60000),
    k_in=st.integers(1, 30000),
)
def test_fitted_gemm_never_faster_than_the_roofline(fitted_on_7b, m_tokens, n_out, k_in):
    hw = fitted_on_7b.hardware
    peak, bandwidth = hw.peak_flops("dense_bf16_tflops"), hw.hbm_bandwidth_bytes_s
    time_s, flops, bytes_ = gemm_time_s(np.array([m_tokens]), n_out, k_in, 2, 2, peak, bandwidth, hw.efficiency)
    assert time_s[0] >= max(flops[0] / peak, bytes_[0] / bandwidth)


def test_tile_quantization_only_rounds_m_up():
    base = with_terms(load_hardware("h100-sxm"), {"gemm_tile_tokens": None})
    tiled = with_terms(base, {"gemm_tile_tokens": 128}).efficiency
    m = np.arange(1, 1025, dtype=np.float64)
    args = (4096, 4096, 2, 2, base.peak_flops("dense_bf16_tflops"), base.hbm_bandwidth_bytes_s)
    plain_s, flops, _ = gemm_time_s(m, *args, base.efficiency)
    tiled_s, tiled_flops, _ = gemm_time_s(m, *args, tiled)
    assert np.all(tiled_s >= plain_s) and np.array_equal(flops, tiled_flops)
    on_tile = m % 128 == 0
    assert np.allclose(tiled_s[on_tile], plain_s[on_tile], rtol=1e-12)
    assert np.all(tiled_s[~on_tile] > plain_s[~on_tile])


@pytest.mark.parametrize("op", ["qkv_proj", "down_proj", None])
def test_occupancy_and_per_op_ceiling_only_slow_a_gemm(op):
    """The output term only moves the ramp's half point up (half-M += half_output_elems / N), so
    switching it on never makes a GEMM faster; it slows narrow outputs (few tiles per row) more than
    wide ones. An op class reaches its own ceiling, an unnamed GEMM (op None) the shared one."""
    hw = load_hardware("h100-sxm")
    assert hw.efficiency.gemm_half_output_elems is not None and hw.efficiency.gemm_compute_max_by_op
    off = with_terms(hw, {"gemm_half_output_elems": None}).efficiency
    m = np.array([1.0, 64, 256, 1024, 4096])
    args = (2, 2, hw.peak_flops("dense_bf16_tflops"), hw.hbm_bandwidth_bytes_s)
    small_on = gemm_time_s(m, 1024, 4096, *args, hw.efficiency, op)[0]
    small_off = gemm_time_s(m, 1024, 4096, *args, off, op)[0]
    big_on = gemm_time_s(m, 28672, 4096, *args, hw.efficiency, op)[0]
    big_off = gemm_time_s(m, 28672, 4096, *args, off, op)[0]
    assert np.all(small_on >= small_off) and np.all(big_on >= big_off)
    assert (small_on / small_off)[-1] > (big_on / big_off)[-1] > 1.0
    assert np.all(np.diff(small_on) > 0) and np.all(np.diff(big_on) > 0)  # still rises with M
    ceiling = hw.efficiency.gemm_compute_max_by_op.get(op, hw.efficiency.gemm_compute_max) if op else \
        hw.efficiency.gemm_compute_max
    eff = gemm_compute_efficiency(np.array([1e9]), hw.efficiency, 1e9, op)
    assert eff[0] == pytest.approx(ceiling, rel=1e-6)


def test_per_op_ceiling_rejects_unknown_class_and_bad_values():
    hw = load_hardware("h100-sxm")
    for bad in ({"mlp": 0.7}, {"qkv_proj": 1.2}, {"o_proj": 0.0}):
        with pytest.raises(ValueError, match="gemm_compute_max_by_op"):
            with_terms(hw, {"gemm_compute_max_by_op": bad})
