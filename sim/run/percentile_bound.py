"""How far a percentile read off one run can be from the deployment's: an upper confidence bound.

The requests of one run are not independent samples. Neighbours share the batch: a burst of arrivals
that slows one request's decode slows everyone decoding beside it, so a run a few request lifetimes
long holds only a few independent batch states, and its P99 TPOT moves by several percent from one
draw of the same traffic to the next (issue 45: listed capacities whose P99 sat at 49 ms on the
search's run read 50.5-53.4 ms on a five times longer one).

The spread of the percentile across the run's four consecutive stretches measures how far the whole
run's percentile could move on another draw: the method of batch means (Law, *Simulation Modeling and
Analysis*, 5th ed., section 9.5.3; it holds for quantiles of a stationary process as for means). The
bound is the run's percentile plus a one-sided Student-t margin at CONFIDENCE over the stretches. The
method needs each stretch to span several correlation times (here about a request lifetime): a steady
run judges at least four lifetimes, so the stretches are few and long (STRETCHES), and a longer run
makes them longer rather than more numerous. On a correlated test series whose stretches span 5-20
correlation times the bound covers the true P99 in 85-93 % of draws at the nominal 95 %, where the
run's own P99 covers it in about half (tests/test_percentile_bound.py): not exact, several times
better than the point.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import t as student_t

CONFIDENCE = 0.95  # one-sided: the deployment's percentile is below the bound with this probability
STRETCHES = 4  # few and long: see the module docstring


def percentile_upper_bound(values_in_arrival_order: np.ndarray, percentile: float,
                           n_stretches: int) -> float | None:
    """The `percentile` of the values (NaN dropped: a request with one output token has no TPOT) plus
    its batch-means margin over `n_stretches` consecutive stretches of equal count; None when no value.
    Fewer stretches where the values are too few for each to hold `min_per_stretch`; with fewer than
    two nothing bounds the spread, and the percentile itself is returned."""
    values = np.asarray(values_in_arrival_order, dtype=float)
    values = values[~np.isnan(values)]
    if not values.size:
        return None
    point = float(np.percentile(values, percentile))
    n_stretches = min(n_stretches, values.size // min_per_stretch(percentile))
    if n_stretches < 2:
        return point
    per_stretch = [float(np.percentile(part, percentile)) for part in np.array_split(values, n_stretches)]
    spread = float(np.std(per_stretch, ddof=1))
    return point + float(student_t.ppf(CONFIDENCE, n_stretches - 1)) * spread / math.sqrt(n_stretches)


def min_per_stretch(percentile: float) -> int:
    """Values a stretch needs for its `percentile` to be one (a P99 of 25 values is their maximum,
    whose spread says nothing about the P99's): 1 / (1 - q)."""
    return math.ceil(100.0 / max(100.0 - percentile, 1e-9) - 1e-9)


def stretches_for(measured_lifetimes: float | None) -> int:
    """STRETCHES once the run judged at least that many request lifetimes, else none (no bound)."""
    if measured_lifetimes is None or not math.isfinite(measured_lifetimes):
        return 0
    return STRETCHES if measured_lifetimes >= STRETCHES else 0


CLOSE_CALL_MAX_GROWTH = 4.0  # a close call runs once more, at most this much longer; past it, it fails
LENGTH_SLACK = 1.2  # the t quantile and the spread move on the longer run: ask for a little more
MIN_GROWTH = 1.5  # a rerun shorter than this would hardly move the margin


def close_call_growth(readings: list[tuple[float | None, float | None, float]]) -> float | None:
    """How many times longer a run must be so that each (value, upper bound, limit) whose value meets
    its limit while its bound does not (a close call) gets a bound within the limit: the batch-means
    margin shrinks as one over the square root of the run's length. None when no reading is a close
    call or deciding one would take more than CLOSE_CALL_MAX_GROWTH times the run."""
    growth = 0.0
    for value, upper, limit in readings:
        if value is None or upper is None or upper <= limit or value > limit:
            continue
        growth = max(growth, ((upper - value) / max(limit - value, 1e-12)) ** 2 * LENGTH_SLACK)
    if growth == 0.0 or growth > CLOSE_CALL_MAX_GROWTH:
        return None
    return max(growth, MIN_GROWTH)
