"""Fit collectives: time = latency + payload / bandwidth, one fit per op and group size.

Each (op, tp) is a small least-squares problem on the relative residual (soft-L1 loss, as the
GEMM fit), with latency >= 0 and bandwidth > 0. Each squared residual is weighted by the square
root of its point's neighbourhood width in log(payload): measurement grids are often linear in
size (Vidur's: 64 KB steps up to 64 MB), which would let the large sizes alone decide the latency
that small (decode) all-reduces pay; full log weighting (every decade equal) let the noisy small
sizes decide the bandwidth instead. On Vidur h100_dgx this half-way weight predicted held-out sizes
best (every other size: 8.3 % MAPE; larger half from the smaller: 12.3 %; unweighted 8.2 / 13.5 %,
full log weight 9.3 / 19.3 %). The result goes to the profile's `collectives`
(sim/inputs/hardware.py `Collectives`): measured all-reduce rows are NCCL's (Vidur and our runner both
time NCCL), so they fill `allreduce.nccl`; `send_recv` takes the fit of its rows (any group).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from sim.inputs.hardware import LinkFit

LOSS, F_SCALE = "soft_l1", 0.05


def fit_link(payload_bytes: np.ndarray, time_s: np.ndarray) -> tuple[LinkFit, np.ndarray]:
    """(LinkFit, relative residuals) of latency + payload / bandwidth on these points."""
    order = np.argsort(np.asarray(payload_bytes, dtype=np.float64), kind="stable")
    payload = np.asarray(payload_bytes, dtype=np.float64)[order]
    time = np.asarray(time_s, dtype=np.float64)[order]
    weight = _log_widths(payload) ** 0.25

    def residuals(x):  # x = (latency_us, log(seconds per GB))
        return weight * ((x[0] * 1e-6 + payload * np.exp(x[1]) * 1e-9) / time - 1.0)

    small = payload <= np.quantile(payload, 0.2)
    large = payload >= np.quantile(payload, 0.8)
    latency0 = float(np.median(time[small])) * 1e6
    slope0 = float(np.median(time[large] / payload[large])) * 1e9
    x0 = np.array([max(latency0, 1e-3), np.log(max(slope0, 1e-9))])
    result = least_squares(residuals, x0, bounds=([0.0, -40.0], [1e6, 40.0]), loss=LOSS, f_scale=F_SCALE)
    fit = LinkFit(latency_us=float(f"{result.x[0]:.4g}"), bus_gb_s=float(f"{1.0 / np.exp(result.x[1]):.4g}"))
    predicted = fit.latency_us * 1e-6 + payload / (fit.bus_gb_s * 1e9)
    relative = np.empty_like(time)
    relative[order] = predicted / time - 1.0
    return fit, relative


def _log_widths(sorted_payload: np.ndarray) -> np.ndarray:
    """Half the log-distance between each point's neighbours (normalised to mean 1)."""
    logs = np.log(sorted_payload)
    if logs.size < 3 or logs[-1] == logs[0]:
        return np.ones_like(logs)
    padded = np.concatenate([[logs[0] - (logs[1] - logs[0])], logs, [logs[-1] + (logs[-1] - logs[-2])]])
    widths = np.maximum((padded[2:] - padded[:-2]) / 2.0, 1e-12)
    return widths / widths.mean()


def fit_collectives(rows: pd.DataFrame) -> tuple[dict, dict]:
    """(collectives mapping for the profile, residuals {name: {mape, bias, n}}) from allreduce
    and send_recv rows."""
    allreduce: dict[int, LinkFit] = {}
    residuals: dict[str, dict] = {}
    send_recv = None
    for (op, tp), group in rows.groupby(["op", "tp"], sort=True, observed=True):
        fit, rel = fit_link(group["payload_bytes"].astype("float64"), group["time_s"].astype("float64"))
        name = f"{op}.tp{int(tp)}"
        residuals[name] = {"mape": float(np.mean(np.abs(rel))), "bias": float(np.mean(rel)), "n": int(rel.size)}
        if op == "allreduce":
            allreduce[int(tp)] = fit
        elif op == "send_recv":
            send_recv = fit
    out: dict = {"allreduce": {"nccl": {tp: fit.model_dump() for tp, fit in allreduce.items()}} if allreduce else {}}
    if send_recv is not None:
        out["send_recv"] = send_recv.model_dump()
    return out, residuals
