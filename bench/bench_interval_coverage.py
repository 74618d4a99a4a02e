"""Honest coverage of the prediction intervals on held-out measurements.

A band is p10-p90 of the predicted time under the model's uncertainty: predicted x exp(+-1.2816
sigma), sigma from the residuals of the fit only (calibrate/uncertainty.py `log_sigma`). Each case
fits on one part of the data and counts the held-out points inside the band (aim >= 80 %) and
reports the band's width (p90 / p10):
- GEMM smooth model: fit H100 Llama-2-7B, hold out Llama-2-70B and CodeLlama-34B; same on A100
  (fit Llama-2-7B, hold out Llama-2-70B, Llama-3-8B/70B).
- GEMM tables: sigma from the leave-every-other-M-out errors of the TP 1/2 tables, coverage on the
  TP 4/8 tables' left-out points (H100 Llama-2-7B).
- All-reduce: fit every other payload size of each network setup, hold out the rest.
Usage: python bench/bench_interval_coverage.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from calibrate.defaults.fit import A100_MODELS, H100_MODELS
from calibrate.fit import fit_profile
from calibrate.fit_tables import gemm_table_entries, holdout_relative_errors
from calibrate.report import residual_rows
from calibrate.uncertainty import log_sigma
from calibrate.vidur_import import bundled_vidur_path, read_measurement_file
from sim.inputs.hardware import load_hardware

Z90 = 1.2816  # standard normal 90th percentile


def coverage(relative_errors, sigma: float) -> float:
    log_err = np.log1p(np.asarray(relative_errors, dtype=float))
    return float(np.mean(np.abs(log_err) <= Z90 * sigma))


def _row(case: str, fit_errors, held_errors) -> list:
    sigma = log_sigma(fit_errors)
    return [case, len(held_errors), sigma, np.exp(2 * Z90 * sigma), coverage(held_errors, sigma),
            coverage(fit_errors, sigma)]  # fmt: skip


def gemm_smooth(models: dict[str, str], profile: str, fit_model: str) -> list:
    frames = {m: read_measurement_file(bundled_vidur_path(rel)) for m, rel in models.items()}
    hw = fit_profile(frames[fit_model], load_hardware(profile), tables=False).hardware
    fit_err = residual_rows(frames[fit_model], hw)["rel_error"]
    held = pd.concat([residual_rows(f, hw) for m, f in frames.items() if m != fit_model])["rel_error"]
    return _row(f"GEMM smooth, {profile[:4]}: fit {fit_model}, hold out the others", fit_err, held)


def gemm_tables() -> list:
    frame = read_measurement_file(bundled_vidur_path(H100_MODELS["Llama-2-7B"]))
    entries = gemm_table_entries(frame)
    fit = [e for t in holdout_relative_errors([x for x in entries if x["tp"] <= 2]).values() for e in t]
    held = [e for t in holdout_relative_errors([x for x in entries if x["tp"] >= 4]).values() for e in t]
    return _row("GEMM tables (H100 7B): sigma from TP1/2, held out TP4/8", fit, held)


def allreduce(setup: str, profile: str) -> list:
    frame = read_measurement_file(bundled_vidur_path(f"network/{setup}/all_reduce.csv"))
    sizes = np.sort(frame["payload_bytes"].astype("int64").unique())
    mask = frame["payload_bytes"].astype("int64").isin(set(sizes[::2]))
    base = load_hardware(profile).model_copy(update={"collectives": None})
    hw = fit_profile(frame[mask].reset_index(drop=True), base).hardware
    fit_err = residual_rows(frame[mask].reset_index(drop=True), hw)["rel_error"]
    held = residual_rows(frame[~mask].reset_index(drop=True), hw)["rel_error"]
    return _row(f"all-reduce {setup}: every other size held out", fit_err, held)


def main() -> int:
    rows = [
        gemm_smooth(H100_MODELS, "h100-sxm", "Llama-2-7B"),
        gemm_smooth(A100_MODELS, "a100-80g-sxm", "Llama-2-7B"),
        gemm_tables(),
        allreduce("h100_dgx", "h100-sxm"),
        allreduce("a100_dgx", "a100-80g-sxm"),
    ]
    table = pd.DataFrame(rows, columns=["case", "n held out", "sigma", "p90/p10", "inside (held out)",
                                        "inside (fit rows)"])  # fmt: skip
    pd.set_option("display.width", 200)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
