"""Screening day-plan candidates on short windows of the day before replaying whole days.

A window is a stretch of the day replayed alone (`sim.fleet.day.run_day(..., offset_s)`): the
day's own arrivals in it, the fleet starting as the candidate's policy wants it at the window's
start with nothing queued, times relative to the window. Two windows say most about whether a
fleet keeps up: the **peak** hour (the highest expected rate: the most load per replica) and the
**steepest rise** (the hour whose expected rate grows most over the hour before: where an
autoscaler lags behind, paying cold starts), each preceded by one hour to settle in (screened too);
overlapping windows are merged. A failure is screened on the window from the hour before the
peak to two hours after it.

A window starts with an empty queue and the policy's count for that moment, so it can pass where
the whole day fails (a backlog from earlier hours) and, more rarely, miss where the day would not
(replicas the day still held from its scale-in window). The screen only orders and prunes: the
choice is verified on whole days (sim.fleet.plan).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

HOUR_S = 3600.0
SCREEN_MIN_DAY_S = 6 * HOUR_S  # shorter days are verified whole: their windows would be most of them


@dataclass(frozen=True)
class Window:
    label: str
    offset_s: float
    duration_s: float

    def to_dict(self) -> dict:
        return asdict(self)


def hourly_rates(generator, duration_s: float) -> np.ndarray:
    """The expected rate of each whole hour of the day (minute midpoints averaged)."""
    n_hours = int(duration_s // HOUR_S)
    t_s = np.arange(n_hours * 60) * 60.0 + 30.0
    return generator.rate_rps(t_s).reshape(n_hours, 60).mean(axis=1)


def _aligned(label: str, start_s: float, end_s: float, chunk_s: float, duration_s: float) -> Window:
    """[start_s, end_s) widened to whole chunks (a window's arrivals are the day's own chunks)."""
    start = math.floor(start_s / chunk_s) * chunk_s
    end = min(math.ceil(end_s / chunk_s) * chunk_s, duration_s)
    return Window(label, float(start), float(end - start))


def _label(kind: str, start_s: float, end_s: float) -> str:
    return f"{kind} {start_s / HOUR_S:g}-{end_s / HOUR_S:g} h"


def screen_windows(spec, generator) -> list[Window]:
    """The peak and steepest-rise windows of `spec`'s day (merged when they overlap); [] for a day
    shorter than SCREEN_MIN_DAY_S."""
    duration_s = spec.workload.duration_s
    if duration_s < SCREEN_MIN_DAY_S:
        return []
    rates = hourly_rates(generator, duration_s)
    peak = int(np.argmax(rates))
    rise = int(np.argmax(np.diff(rates))) + 1
    spans = sorted({("peak", max(peak - 1, 0), peak + 1), ("rise", max(rise - 1, 0), rise + 1)},
                   key=lambda span: span[1])
    merged: list[list] = []
    for kind, first, end in spans:
        if merged and first <= merged[-1][2]:
            merged[-1][0] = merged[-1][0] if merged[-1][0] == kind else "peak+rise"
            merged[-1][2] = max(merged[-1][2], end)
        else:
            merged.append([kind, first, end])
    return [_aligned(_label(kind, first * HOUR_S, end * HOUR_S), first * HOUR_S, end * HOUR_S,
                     spec.workload.chunk_s, duration_s) for kind, first, end in merged]


def failure_window(spec, peak_s: float) -> Window:
    """From the hour before the peak's hour to two hours after it (clipped to the day)."""
    duration_s = spec.workload.duration_s
    hour_s = math.floor(peak_s / HOUR_S) * HOUR_S
    start_s, end_s = max(hour_s - HOUR_S, 0.0), min(hour_s + 2 * HOUR_S, duration_s)
    return _aligned(_label("failure", start_s, end_s), start_s, end_s, spec.workload.chunk_s, duration_s)


def window_spec(spec, window: Window):
    """`spec` cut to the window's length (run it with offset_s = window.offset_s)."""
    return spec.model_copy(update={"workload": spec.workload.model_copy(update={"duration_s": window.duration_s})})


def meets_every_hour(summary: dict) -> bool:
    """Every hour that had arrivals met the attainment target."""
    attained = [row["slo_attainment"] for row in summary["hours"] if row["slo_attainment"] is not None]
    return bool(attained) and summary["hours_meeting_target"] == len(attained)


def window_hours(summary: dict, window: Window) -> list[dict]:
    """The window's hours as hours of the day, with their attainment."""
    first = window.offset_s / HOUR_S
    return [{"hour": first + row["hour"], "n_arrived": row["n_arrived"], "slo_attainment": row["slo_attainment"]}
            for row in summary["hours"]]
