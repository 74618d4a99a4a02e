"""Residuals of a profile against measurements: per-row table, per-op MAPE, a log-log plot.

MAPE is a fraction (0.07 means 7%): mean of |predicted - measured| / measured.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from calibrate.measurements import OPS
from calibrate.predict import answered_by, predict_times_s
from sim.inputs.hardware import HardwareProfile
from sim.output import write_png


def residual_rows(frame: pd.DataFrame, hw: HardwareProfile) -> pd.DataFrame:
    """One row per measurement: op, tp, measured_s, predicted_s, rel_error (signed), ape,
    answered_by ("table" or "smooth")."""
    measured = frame["time_s"].astype("float64").to_numpy()
    predicted = predict_times_s(frame, hw)
    rel_error = predicted / measured - 1.0
    return pd.DataFrame({
        "op": frame["op"].astype(str).to_numpy(), "tp": frame["tp"].astype("int64").to_numpy(),
        "measured_s": measured, "predicted_s": predicted, "rel_error": rel_error, "ape": np.abs(rel_error),
        "answered_by": answered_by(frame, hw),
    })  # fmt: skip


def mape_summary(rows: pd.DataFrame) -> dict:
    """From `residual_rows`, ops in schema order:
    `{"mape", "bias", "per_op": {op: {"mape", "bias", "n", "answered_by": {"table": n, "smooth": n}}}}`
    ("kernel fit": n too, for rows a `calibration.kernel_fits` entry answers: a kernel not simulated);
    bias is the mean signed relative error (positive: predicted too slow)."""
    per_op = {}
    for op in sorted(rows["op"].unique(), key=lambda name: OPS.index(name) if name in OPS else len(OPS)):
        group = rows.loc[rows["op"] == op]
        per_op[op] = {"mape": float(group["ape"].mean()), "bias": float(group["rel_error"].mean()),
                      "n": int(len(group)), "answered_by": _answered_counts(group)}  # fmt: skip
    return {"mape": float(rows["ape"].mean()), "bias": float(rows["rel_error"].mean()), "per_op": per_op}


def _answered_counts(group: pd.DataFrame) -> dict[str, int]:
    if "answered_by" not in group:
        return {"table": 0, "smooth": int(len(group))}
    counts = group["answered_by"].value_counts()
    out = {name: int(counts.get(name, 0)) for name in ("table", "smooth")}
    if counts.get("kernel fit", 0):
        out["kernel fit"] = int(counts["kernel fit"])
    return out


def _answered_text(counts: dict[str, int]) -> str:
    if counts.get("kernel fit"):
        return "kernel fit (not simulated)"
    if counts["table"] and counts["smooth"]:
        return f"table ({counts['table']}) + smooth ({counts['smooth']})"
    return "table" if counts["table"] else "smooth"


def summary_table_rows(summary: dict) -> list[list[str]]:
    """Rows for a people-facing table: op, n, MAPE %, bias %, answered by; plus an `all` row."""
    rows = [
        [op, str(v["n"]), f"{100 * v['mape']:.1f}", f"{100 * v['bias']:+.1f}", _answered_text(v["answered_by"])]
        for op, v in summary["per_op"].items()
    ]
    n_all = sum(v["n"] for v in summary["per_op"].values())
    return rows + [["all", str(n_all), f"{100 * summary['mape']:.1f}", f"{100 * summary['bias']:+.1f}", ""]]


def plot_predicted_vs_measured(rows: pd.DataFrame, path: str | os.PathLike, title: str) -> None:
    """Log-log scatter of predicted vs measured seconds, one colour per op, with y = x."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 6))
    for op, group in rows.groupby("op", sort=True):
        ax.scatter(group["measured_s"] * 1e3, group["predicted_s"] * 1e3, s=6, alpha=0.6, label=op)
    low = float(min(rows["measured_s"].min(), rows["predicted_s"].min())) * 1e3
    high = float(max(rows["measured_s"].max(), rows["predicted_s"].max())) * 1e3
    ax.plot([low, high], [low, high], color="black", linewidth=0.8, label="predicted = measured")
    ax.set(xscale="log", yscale="log", xlabel="measured (ms)", ylabel="predicted (ms)", title=title)
    ax.legend(fontsize=8, markerscale=2)
    fig.tight_layout()
    try:
        write_png(Path(path), fig)
    finally:
        plt.close(fig)
