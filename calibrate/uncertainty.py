"""Uncertainty of each op class's time, from the residuals of its fit (1 sigma of log(predicted /
measured), so a time scale drawn as exp(N(0, sigma)) covers the fit's spread).

Classes (`sim.cost.time_scale.TIME_SCALE_KEYS` plus `gemm_table`): gemm (smooth model), gemm_table
(measured tables, from leave-every-other-M-out), elementwise, attention, collective, overhead.
A class no measurement constrains gets `GUESSED_SIGMA` (documented wide default, 0.25 = about
+-25 % at 1 sigma); `overhead` (no kernel measures the step overhead) always does.
"""

from __future__ import annotations

import numpy as np

GUESSED_SIGMA = 0.25
CLASSES = ("gemm", "gemm_table", "elementwise", "attention", "collective", "overhead")


def log_sigma(relative_errors) -> float:
    """RMS of log(1 + relative error): spread and bias together (a biased fit is uncertain too)."""
    errors = np.asarray(list(relative_errors), dtype=np.float64)
    errors = errors[np.isfinite(errors) & (errors > -1.0)]
    if errors.size == 0:
        return GUESSED_SIGMA
    return float(f"{np.sqrt(np.mean(np.log1p(errors) ** 2)):.3g}")


def uncertainty_from_residuals(residuals_by_class: dict[str, list], base: dict | None) -> dict[str, float]:
    """Sigma per class: from residuals where a class has them, else the base profile's value,
    else `GUESSED_SIGMA`."""
    base = base or {}
    out = {}
    for name in CLASSES:
        errors = residuals_by_class.get(name)
        out[name] = log_sigma(errors) if errors is not None and len(errors) else base.get(name, GUESSED_SIGMA)
    return out
