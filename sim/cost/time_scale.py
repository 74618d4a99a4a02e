"""Time scales: a multiplier per op class on every time of that class (`CostModel(time_scale=...)`),
what the prediction intervals perturb (sim/cost/uncertainty.py)."""

from __future__ import annotations

import numpy as np

from sim.errors import InputError

TIME_SCALE_KEYS = ("gemm", "elementwise", "attention", "collective", "overhead")


def checked_time_scale(time_scale: dict[str, float] | None) -> dict[str, float]:
    """Every `TIME_SCALE_KEYS` entry (1.0 when not given); unknown keys or factors <= 0 refused."""
    out = dict.fromkeys(TIME_SCALE_KEYS, 1.0)
    for key, value in (time_scale or {}).items():
        if key not in out:
            raise InputError("time_scale", key, " | ".join(TIME_SCALE_KEYS))
        if not np.isfinite(value) or value <= 0:
            raise InputError("time_scale", key, "a finite factor > 0")
        out[key] = float(value)
    return out
