"""Fit collectives: time = latency + payload / bandwidth, one fit per op and group size.

Each (op, tp) is a small least-squares problem on the relative residual (soft-L1 loss, as the
GEMM fit), with latency >= 0 and bandwidth > 0. The result goes to the profile's `collectives`
(sim/hardware.py `Collectives`): measured all-reduce rows are NCCL's (Vidur and our runner both
time NCCL), so they fill `allreduce.nccl`; `send_recv` takes the fit of its rows (any group).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from sim.hardware import LinkFit

LOSS, F_SCALE = "soft_l1", 0.05


def fit_link(payload_bytes: np.ndarray, time_s: np.ndarray) -> tuple[LinkFit, np.ndarray]:
    """(LinkFit, relative residuals) of latency + payload / bandwidth on these points."""
    payload = np.asarray(payload_bytes, dtype=np.float64)
    time = np.asarray(time_s, dtype=np.float64)

    def residuals(x):  # x = (latency_us, log(seconds per GB))
        return (x[0] * 1e-6 + payload * np.exp(x[1]) * 1e-9) / time - 1.0

    small = payload <= np.quantile(payload, 0.2)
    large = payload >= np.quantile(payload, 0.8)
    latency0 = float(np.median(time[small])) * 1e6
    slope0 = float(np.median(time[large] / payload[large])) * 1e9
    x0 = np.array([max(latency0, 1e-3), np.log(max(slope0, 1e-9))])
    result = least_squares(residuals, x0, bounds=([0.0, -40.0], [1e6, 40.0]), loss=LOSS, f_scale=F_SCALE)
    fit = LinkFit(latency_us=float(f"{result.x[0]:.4g}"), bus_gb_s=float(f"{1.0 / np.exp(result.x[1]):.4g}"))
    predicted = fit.latency_us * 1e-6 + payload / (fit.bus_gb_s * 1e9)
    return fit, predicted / time - 1.0


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
