"""Percentiles of weighted samples (the recorder's inter-token gaps are kept weighted)."""

from __future__ import annotations

import numpy as np


def weighted_percentiles(values: np.ndarray, weights: np.ndarray, quantiles=(0.5, 0.9, 0.99)) -> list[float]:
    """Percentiles of a weighted sample (inverted CDF: the smallest value whose cumulative weight
    reaches q of the total), exactly as if each value were repeated `weight` times."""
    if values.size == 0:
        return [float("nan")] * len(quantiles)
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(weights[order])
    total = cumulative[-1]
    picks = [np.searchsorted(cumulative, q * total, side="left") for q in quantiles]
    return [float(values[order][min(i, values.size - 1)]) for i in picks]
