"""Calibration against Vidur's measured H100 / A100 data (calibrate/data/vidur, MIT).

Prints, per GEMM op:
1. Measured tables, leave half out: on H100 Llama-2-7B, every other measured M is dropped from each
   (op, TP) table and predicted from the rest (log-log interpolation). Target <= 3.5 % MAPE per op.
2. Smooth model across models: fit on H100 Llama-2-7B only (no tables), predict Llama-2-70B and
   CodeLlama-34B: MAPE and bias (mean signed relative error). Targets <= 10 % and within +-3 %.
3. Default profiles on every bundled model, before (the team's unfitted starting guesses) and after
   (the bundled h100-sxm / a100-80g-sxm, fitted on ALL bundled data of that GPU: in-sample for these
   models; the cross-model numbers of part 2 are the out-of-sample check).
4. Collectives: the bundled profiles' all-reduce fits against each network setup.

Usage: python bench/bench_calibration_vidur.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

if __package__ in (None, ""):  # run as a script from a checkout without `pip install`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from calibrate.defaults.fit import A100_MODELS, H100_MODELS
from calibrate.fit import fit_profile, with_terms
from calibrate.fit_tables import gemm_table_entries, holdout_relative_errors
from calibrate.report import residual_rows
from calibrate.vidur_import import bundled_vidur_path, read_measurement_file
from sim.inputs.hardware import load_hardware

OPS = ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"]
STARTING_GUESS = {"gemm_compute_max": 0.72, "gemm_half_tokens": 24, "memory": 0.85, "roofline_blend": 8.0,
                  "kernel_launch_us": 3.0, "gemm_tile_tokens": None, "gemm_compute_max_by_op": None,
                  "gemm_half_output_elems": None}  # fmt: skip
NETWORK = {"h100_dgx": "h100-sxm", "h100_pairwise_nvlink": "h100-pcie", "a100_dgx": "a100-80g-sxm",
           "a100_pairwise_nvlink": "a100-80g-pcie"}  # fmt: skip


def _frames(models: dict[str, str]) -> dict[str, pd.DataFrame]:
    return {name: read_measurement_file(bundled_vidur_path(rel)) for name, rel in models.items()}


def _per_op(frame: pd.DataFrame, hw) -> dict[str, tuple[float, float]]:
    rows = residual_rows(frame, hw)
    return {op: (g["ape"].mean(), g["rel_error"].mean()) for op, g in rows.groupby("op")}


def table_holdout(frame: pd.DataFrame) -> None:
    errors = holdout_relative_errors(gemm_table_entries(frame))
    print("1. Measured tables, leave every other M out (H100 Llama-2-7B, all TP), MAPE % (target <= 3.5)")
    print("   " + "  ".join(f"{op} {100 * np.mean(np.abs(errors[op])):.2f} (n={len(errors[op])})" for op in OPS))


def cross_model(h100: dict[str, pd.DataFrame]) -> None:
    base = load_hardware("h100-sxm")
    started = time.perf_counter()
    fitted = fit_profile(h100["Llama-2-7B"], base, tables=False).hardware
    print(f"\n2. Smooth model fitted on H100 Llama-2-7B only ({time.perf_counter() - started:.1f} s), "
          "MAPE % / bias % (targets <= 10 / within +-3)")
    for model, frame in h100.items():
        res = _per_op(frame, fitted)
        tag = "in-sample" if model == "Llama-2-7B" else "held out"
        print(f"   {model:14s} {tag:9s} " + "  ".join(f"{op} {100 * res[op][0]:5.1f} / {100 * res[op][1]:+5.1f}"
                                                 for op in OPS))  # fmt: skip


def defaults(gpu_frames: dict[str, dict[str, pd.DataFrame]]) -> None:
    print("\n3. Default profiles on every bundled model, MAPE % per op: before (starting guess) -> after (bundled)")
    for profile, frames in gpu_frames.items():
        after = load_hardware(profile)
        before = with_terms(after, STARTING_GUESS)
        for model, frame in frames.items():
            b, a = _per_op(frame, before), _per_op(frame, after)
            print(f"   {profile:13s} {model:14s} " + "  ".join(f"{op} {100 * b[op][0]:5.1f} -> {100 * a[op][0]:4.1f}"
                                                            for op in OPS))  # fmt: skip


def collectives() -> None:
    print("\n4. All-reduce: bundled profile fits vs Vidur network data (MAPE % per TP; in-sample for the fitted ones)")
    for setup, profile in NETWORK.items():
        frame = read_measurement_file(bundled_vidur_path(f"network/{setup}/all_reduce.csv"))
        hw = load_hardware(profile)
        if setup.endswith("pairwise_nvlink"):
            bridge = hw.collectives.nvlink_bridge["nccl"]
            two = frame[frame["tp"] == 2]
            pred = bridge.latency_us * 1e-6 + two["payload_bytes"].astype(float) / (bridge.bus_gb_s * 1e9)
            bridge_mape = np.mean(np.abs(pred / two["time_s"].astype(float) - 1))
            frame = frame[frame["tp"] != 2]
        rows = residual_rows(frame.reset_index(drop=True), hw)
        per_tp = {int(tp): g["ape"].mean() for tp, g in rows.groupby("tp")}
        text = "  ".join(f"TP{tp} {100 * v:.1f}" for tp, v in per_tp.items())
        if setup.endswith("pairwise_nvlink"):
            text = f"TP2 (nvlink_bridge) {100 * bridge_mape:.1f}  " + text
        print(f"   {setup:22s} -> {profile:13s} {text}")


def main() -> int:
    h100, a100 = _frames(H100_MODELS), _frames(A100_MODELS)
    table_holdout(h100["Llama-2-7B"])
    cross_model(h100)
    defaults({"h100-sxm": h100, "a100-80g-sxm": a100})
    collectives()
    return 0


if __name__ == "__main__":
    sys.exit(main())
