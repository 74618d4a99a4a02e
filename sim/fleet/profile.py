"""Rate profiles over a day or a week: the expected request rate at each simulated second.

A profile is a base curve (constant, diurnal cosine, a measured per-window series, or the shape of
a bundled trace's arrivals) times an optional weekly pattern, plus bursts (multipliers over a
window) and steps (from a time on, the base replaced by a fixed rate). `rate_rps(t)` is vectorised
over an array of seconds; `mean_rate_rps` integrates it numerically (1 s midpoints).
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

import numpy as np
from pydantic import Field, NonNegativeFloat, PositiveFloat, model_validator

from sim.schema import StrictModel

DAY_S = 86_400.0
WEEK_S = 7 * DAY_S
MAX_RATE_RPS = 1e6
# A rate window: at least a millisecond (time // window must stay a modest int64: a 1e-300 s
# window overflowed the cast), at most a week.
WINDOW_S = dict(ge=1e-3, le=WEEK_S)


class ConstantRate(StrictModel):
    kind: Literal["constant"]
    rate_rps: float = Field(gt=0, le=MAX_RATE_RPS)


class DiurnalRate(StrictModel):
    """A 24 h cosine: `peak_rps` at `peak_hour` (0-24, local time of simulated t = 0 s being
    midnight), `trough_rps` twelve hours away."""

    kind: Literal["diurnal"]
    peak_rps: float = Field(gt=0, le=MAX_RATE_RPS)
    trough_rps: float = Field(gt=0, le=MAX_RATE_RPS)
    peak_hour: float = Field(14.0, ge=0, lt=24)

    @model_validator(mode="after")
    def _ordered(self) -> DiurnalRate:
        if self.trough_rps > self.peak_rps:
            raise ValueError("trough_rps must be <= peak_rps")
        return self


class SeriesRate(StrictModel):
    """A measured rate per window (`rates_rps[k]` over [k, k+1) x window_s), repeated (tiled)
    when the day is longer than the series."""

    kind: Literal["series"]
    window_s: float = Field(**WINDOW_S)
    rates_rps: list[Annotated[float, Field(ge=0, le=MAX_RATE_RPS)]] = Field(min_length=1)


class TraceShapeRate(StrictModel):
    """The arrival shape of a trace (a bundled name or path): its arrivals counted per `window_s`,
    scaled so their mean is `mean_rps`, tiled over the day (an hour-long trace repeats each hour)."""

    kind: Literal["trace_shape"]
    trace: str
    window_s: float = Field(60.0, **WINDOW_S)
    mean_rps: float = Field(gt=0, le=MAX_RATE_RPS)


BaseRate = Annotated[ConstantRate | DiurnalRate | SeriesRate | TraceShapeRate, Field(discriminator="kind")]


class Burst(StrictModel):
    """The rate times `multiplier` over [start_s, start_s + duration_s)."""

    start_s: NonNegativeFloat
    duration_s: PositiveFloat
    multiplier: float = Field(gt=0, le=1000)


class Step(StrictModel):
    """From `at_s` on (until the next step), the base curve is replaced by `rate_rps`."""

    at_s: NonNegativeFloat
    rate_rps: float = Field(ge=0, le=MAX_RATE_RPS)


class RateProfile(StrictModel):
    base: BaseRate
    weekly: list[Annotated[float, Field(ge=0, le=100)]] | None = Field(None, min_length=7, max_length=7)
    bursts: list[Burst] = []
    steps: list[Step] = []


class Rates:
    """A validated RateProfile as a function of time (seconds from the day's start)."""

    def __init__(self, profile: RateProfile, series_rps: np.ndarray | None = None):
        self.profile = profile
        self._series = series_rps  # TraceShapeRate: its per-window rates, already scaled
        self._steps = sorted(profile.steps, key=lambda step: step.at_s)

    def rate_rps(self, t_s: np.ndarray) -> np.ndarray:
        t_s = np.asarray(t_s, dtype=np.float64)
        rate = self._base(t_s)
        for step in self._steps:
            rate = np.where(t_s >= step.at_s, step.rate_rps, rate)
        if self.profile.weekly is not None:
            rate = rate * np.asarray(self.profile.weekly)[(t_s // DAY_S).astype(np.int64) % 7]
        for burst in self.profile.bursts:
            inside = (t_s >= burst.start_s) & (t_s < burst.start_s + burst.duration_s)
            rate = np.where(inside, rate * burst.multiplier, rate)
        return rate

    def _base(self, t_s: np.ndarray) -> np.ndarray:
        base = self.profile.base
        if isinstance(base, ConstantRate):
            return np.full(t_s.shape, base.rate_rps)
        if isinstance(base, DiurnalRate):
            mid, half = (base.peak_rps + base.trough_rps) / 2, (base.peak_rps - base.trough_rps) / 2
            return mid + half * np.cos(2 * math.pi * (t_s / 3600.0 - base.peak_hour) / 24.0)
        series = np.asarray(base.rates_rps) if isinstance(base, SeriesRate) else self._series
        return series[(t_s // base.window_s).astype(np.int64) % series.shape[0]]

    def mean_rate_rps(self, start_s: float, end_s: float) -> float:
        """The mean expected rate over [start_s, end_s) (1 s midpoint sums)."""
        if end_s <= start_s:
            return 0.0
        edges = np.arange(start_s, end_s, 1.0)
        widths = np.minimum(edges + 1.0, end_s) - edges
        return float((self.rate_rps(edges + widths / 2) * widths).sum() / (end_s - start_s))

    def peak_rps(self, start_s: float, end_s: float, window_s: float = 60.0) -> float:
        """The largest mean rate over any `window_s` window starting on a window boundary."""
        starts = np.arange(start_s, end_s, window_s)
        return max(self.mean_rate_rps(s, min(s + window_s, end_s)) for s in starts)


def trace_shape_series(shape: TraceShapeRate, base_dir=None) -> np.ndarray:
    """The trace's arrivals per window, scaled to `mean_rps` (its length: the trace's span in windows)."""
    from pathlib import Path

    from sim.errors import InputError
    from sim.inputs.workload.read_trace import load_trace

    source = shape.trace
    if base_dir is not None and (Path(base_dir) / source).is_file():
        source = str(Path(base_dir) / source)
    arrival_s = load_trace(source).arrival_s
    arrival_s = arrival_s - arrival_s.min()
    n_windows = max(int(arrival_s.max() // shape.window_s) + 1, 1)
    counts = np.bincount((arrival_s // shape.window_s).astype(np.int64), minlength=n_windows).astype(np.float64)
    if counts.sum() <= 0:
        raise InputError(shape.trace, "trace_shape", "the trace has no arrivals to take a shape from")
    return counts * (shape.mean_rps / counts.mean())
