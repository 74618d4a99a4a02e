"""Calibration against Vidur's measured H100 data: fit on one model, predict the others.

GEMMs: fit the GEMM terms on Llama-2-7B's mlp.csv only (every TP), then predict Llama-2-70B and
CodeLlama-34B (every TP) for the four projection GEMMs; print MAPE per (model, op) for the
bundled default `h100-sxm` profile and for the fitted one.
All-reduce: fit allreduce_bus and the link latency on every other payload size of h100_dgx
all_reduce.csv (and, separately, on the smaller half), predict the other sizes.

Data: the copies bundled in calibrate/data/vidur (MIT, see PROVENANCE.md there).
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

from calibrate.fit import fit_profile
from calibrate.report import residual_rows
from calibrate.vidur_import import bundled_vidur_path, read_measurement_file
from sim.hardware import load_hardware

MLP_CSVS = {
    "Llama-2-7B": "compute/h100/meta-llama/Llama-2-7b-hf/mlp.csv",
    "Llama-2-70B": "compute/h100/meta-llama/Llama-2-70b-hf/mlp.csv",
    "CodeLlama-34B": "compute/h100/codellama/CodeLlama-34b-Instruct-hf/mlp.csv",
}
FIT_MODEL = "Llama-2-7B"
ALLREDUCE_CSV = "network/h100_dgx/all_reduce.csv"


def gemm_measurements() -> dict[str, pd.DataFrame]:
    return {model: read_measurement_file(bundled_vidur_path(rel)) for model, rel in MLP_CSVS.items()}


def gemm_mape_table(frames: dict[str, pd.DataFrame], profiles: dict) -> pd.DataFrame:
    """MAPE (fraction) per (model, op) for each profile: columns are profile names."""
    table = {}
    for name, hw in profiles.items():
        for model, frame in frames.items():
            rows = residual_rows(frame, hw)
            for op, ape in rows.groupby("op", sort=False)["ape"]:
                table.setdefault((model, op), {})[name] = ape.mean()
    return pd.DataFrame.from_dict(table, orient="index").rename_axis(["model", "op"])


def allreduce_split(frame: pd.DataFrame, how: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(fit rows, held-out rows) by payload size: every other size, or the smaller half."""
    sizes = np.sort(frame["payload_bytes"].astype("int64").unique())
    chosen = set(sizes[::2] if how == "every other size" else sizes[: len(sizes) // 2])
    mask = frame["payload_bytes"].astype("int64").isin(chosen)
    return frame[mask].reset_index(drop=True), frame[~mask].reset_index(drop=True)


def allreduce_results(frame: pd.DataFrame, base) -> list[dict]:
    out = []
    for how in ("every other size", "smaller half"):
        fit_rows, held_out = allreduce_split(frame, how)
        fitted = fit_profile(fit_rows, base).hardware
        rows = residual_rows(held_out, fitted)
        out.append({
            "fit on": how, "bus": fitted.efficiency.allreduce_bus,
            "latency_us": fitted.interconnect.gpu_link_latency_us,
            "fit_mape": residual_rows(fit_rows, fitted)["ape"].mean(), "held_out_mape": rows["ape"].mean(),
            "default_mape": residual_rows(held_out, base)["ape"].mean(),
            **{f"held_out_tp{tp}": ape.mean() for tp, ape in rows.groupby("tp")["ape"]},
        })  # fmt: skip
    return out


def main() -> int:
    base = load_hardware("h100-sxm")
    frames = gemm_measurements()
    started = time.perf_counter()
    fit = fit_profile(frames[FIT_MODEL], base)
    fit_s = time.perf_counter() - started
    terms = fit.classes[0].terms
    print(f"GEMM fit on {FIT_MODEL} ({len(frames[FIT_MODEL])} rows, {fit_s:.1f} s):")
    print("  " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in terms.items()))
    table = gemm_mape_table(frames, {"default": base, "fitted": fit.hardware})
    pd.set_option("display.width", 160)
    print("\nMAPE per (model, op), %  [Llama-2-7B in-sample; the others held out]")
    print((100 * table).round(1).to_string())
    print("\nMAPE per model, %")
    print((100 * table.groupby(level="model", sort=False).mean()).round(1).to_string())
    allreduce = read_measurement_file(bundled_vidur_path(ALLREDUCE_CSV))
    print(f"\nAll-reduce, h100_dgx ({len(allreduce)} rows), fit allreduce_bus + gpu_link_latency_us:")
    print(pd.DataFrame(allreduce_results(allreduce, base)).round(3).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
