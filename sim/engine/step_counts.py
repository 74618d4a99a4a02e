"""Shared read-only tables of step counts for a run of k steps ([1..k], [k-1..0]): views of one
array grown on demand, so the recorder's per-run arithmetic allocates nothing for them."""

from __future__ import annotations

import numpy as np

_STEP_NUMBERS = np.arange(1.0, 4097.0)


def step_numbers(k: int) -> np.ndarray:
    """[1.0, 2.0, ..., k] (a view of a shared table; do not mutate)."""
    global _STEP_NUMBERS
    if k > _STEP_NUMBERS.shape[0]:
        _STEP_NUMBERS = np.arange(1.0, 2.0 * k + 1.0)
    return _STEP_NUMBERS[:k]


_COUNTDOWN = np.arange(4095, -1, -1)


def countdown(k: int) -> np.ndarray:
    """[k-1, k-2, ..., 0] (a view of a shared table; do not mutate)."""
    global _COUNTDOWN
    if k > _COUNTDOWN.shape[0]:
        _COUNTDOWN = np.arange(2 * k - 1, -1, -1)
    return _COUNTDOWN[_COUNTDOWN.shape[0] - k :]
