"""The latency attribution's lines of summary.json (sim/run/attribution.py keeps the parts per request)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from sim.run.attribution import PARTS


def attribution_summary(table: Mapping[str, np.ndarray]) -> dict | None:
    """For summary.json (one flat level), from a requests table (`sim.run.summary.requests_columns` or
    a DataFrame of them): `mean_<part>_s` over finished requests, and for the p50 and p99 requests
    by e2e (nearest rank) `p50_request_id`, `p50_e2e_s`, `p50_<part>_s` (same for p99). None when
    no request finished."""
    done = np.asarray(table["status"]) == "FINISHED"
    columns = [f"attr_{name}_s" for name in PARTS]
    if not done.any() or columns[0] not in table:
        return None
    e2e_s = np.asarray(table["e2e_s"])[done]
    parts_s = {name: np.asarray(table[column])[done] for name, column in zip(PARTS, columns)}
    order = np.argsort(e2e_s, kind="stable")
    out: dict = {f"mean_{name}_s": float(values.mean()) for name, values in parts_s.items()}
    request_ids = np.asarray(table["request_id"])[done]
    for label, quantile in (("p50", 0.5), ("p99", 0.99)):
        row = order[max(int(np.ceil(quantile * e2e_s.shape[0])) - 1, 0)]
        out[f"{label}_request_id"] = int(request_ids[row])
        out[f"{label}_e2e_s"] = float(e2e_s[row])
        out.update({f"{label}_{name}_s": float(values[row]) for name, values in parts_s.items()})
    return out
