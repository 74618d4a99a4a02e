"""Draws of the cost model's error: one multiplicative time scale per op class per replay.

Each class's time is scaled by exp(N(0, sigma)), sigma from the profile's `uncertainty` (the
1-sigma log error of that class's fit, written by calibration or calibrate/defaults/fit.py), or
`GUESSED_SIGMA` for a class the profile says nothing about. GEMMs take `gemm_table` when every
GEMM shape of the model is in the profile's measured tables, else `gemm` (the smooth model).
"""

from __future__ import annotations

import numpy as np

from sim.cost.model import CostModel
from sim.cost.time_scale import TIME_SCALE_KEYS

GUESSED_SIGMA = 0.25  # documented wide default: about +-25 % at one sigma


def class_sigmas(cost: CostModel) -> dict[str, float]:
    """Sigma per time-scale class for this cost model's profile and model."""
    given = dict(cost.hw.uncertainty or {})
    shapes = [(int(n), int(k), int(cost.weight_bytes_el)) for _, n, k in cost._gemm_shapes()]
    all_tabled = bool(shapes) and all(key in cost.tables for key in shapes)
    out = {key: float(given.get(key, GUESSED_SIGMA)) for key in TIME_SCALE_KEYS}
    if all_tabled and "gemm_table" in given:
        out["gemm"] = float(given["gemm_table"])
    return out


def draw_time_scale(sigmas: dict[str, float], rng: np.random.Generator) -> dict[str, float]:
    """One draw: a factor per class (classes in `TIME_SCALE_KEYS` order, so a seed fixes them)."""
    return {key: float(np.exp(rng.normal(0.0, sigmas[key]))) for key in TIME_SCALE_KEYS}
