"""What one replica is sized on: a slice of the workload that keeps the workload's own burstiness.

A trace's mean rate hides its peaks (the bundled Azure conversation trace: its busiest 900
consecutive requests arrive ~1.5x faster than its mean). Sizing on the first requests re-timed to
a mean rate sizes for an average minute, and the cluster then fails in the busy ones.

`busiest` slicing (the default) takes the densest run of consecutive requests (the shortest span
holding `n_measured` arrivals) plus the requests just before it as warm-up, and re-times the slice
with the *whole workload's* time factor: "rate r" means the whole workload arrives at a mean of
r req/s, so the busy window arrives at r x peak_to_mean. `head` slicing (the planner's former
behaviour, kept for comparison) takes the first requests and re-times them to a mean of r.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.errors import InputError
from sim.inputs.workload.trace import Trace
from sim.inputs.workload.transforms import extend, mean_qps, scale_rate

SIZINGS = ("busiest", "head")


@dataclass(frozen=True)
class SearchSlice:
    """The requests one replica's rate search simulates. `reference_qps`: the mean rate that
    `rate_qps` refers to (the whole workload's for `busiest`, the slice's own for `head`);
    `n_warmup`: leading requests that warm the replica and are not judged; `peak_to_mean`: the
    judged requests' arrival rate over the whole workload's mean rate."""

    trace: Trace
    reference_qps: float
    n_warmup: int
    sizing: str
    peak_to_mean: float
    first_request: int  # index of the slice's first request in the workload
    workload: Trace | None = None  # the whole workload it was cut from (for `longer`)
    warmup_fraction: float = 0.0

    def at_rate(self, rate_qps: float) -> Trace:
        """The slice re-timed so that the workload it stands for arrives at a mean of `rate_qps`."""
        return scale_rate(self.trace, factor=rate_qps / self.reference_qps, where="planner rate")

    def longer(self, n_requests: int, min_warmup: int) -> SearchSlice:
        """The slice cut again with `n_requests` requests, at least `min_warmup` of them warm-up: the
        densest such run of the workload (busiest) or its head, the workload drawn longer first when it
        is shorter (sim.inputs.workload.transforms.extend: a synthetic spec's process run longer, a
        trace tiled at the same mean rate). What a rate point runs when this slice is too short to
        reach steady state (sim.run.steady_state)."""
        source = self.workload if self.workload is not None else self.trace
        source = extend(source, n_requests)
        reference_qps = None
        if self.sizing == "busiest":  # a fresh draw's own mean is the rate it stands for; a tile keeps the original's
            reference_qps = mean_qps(source) if source.redraw is not None else self.reference_qps
        return search_slice(source, n_requests, self.warmup_fraction, self.sizing, min_warmup,
                            reference_qps=reference_qps)

    def to_dict(self) -> dict:
        return {"sizing": self.sizing, "n_requests": len(self.trace), "n_warmup": self.n_warmup,
                "first_request": self.first_request, "reference_qps": self.reference_qps,
                "peak_to_mean": self.peak_to_mean}


def densest_window(arrival_s: np.ndarray, n: int, first_start: int = 0) -> tuple[int, float]:
    """(start, span_s) of the `n` consecutive arrivals with the shortest span, start >= first_start
    (earliest such start on ties). Needs len(arrival_s) >= first_start + n."""
    spans = arrival_s[first_start + n - 1:] - arrival_s[first_start:len(arrival_s) - n + 1]
    start = int(np.argmin(spans))
    return first_start + start, float(spans[start])


def search_slice(trace: Trace, max_requests: int, warmup_fraction: float, sizing: str = "busiest",
                 min_warmup: int = 0, reference_qps: float | None = None) -> SearchSlice:
    """The slice of `trace` a replica's rate search runs on (see the module docstring): `max_requests`
    requests, the first max(`warmup_fraction` of them, `min_warmup`) warm-up. `reference_qps`: the mean
    rate "rate r" refers to for busiest slicing (default: `trace`'s own; a tiled workload passes the
    original's)."""
    if sizing not in SIZINGS:
        raise InputError("--sizing", sizing, f"one of {', '.join(SIZINGS)}")
    if max_requests < 20:
        raise InputError("--max-requests", None, f"must be >= 20 to judge percentiles; got {max_requests}")
    if not 0 <= warmup_fraction < 1:
        raise InputError("warmup_fraction", None, f"must be in [0, 1); got {warmup_fraction}")
    whole_qps = reference_qps or mean_qps(trace)
    if whole_qps is None:
        raise InputError(trace.source or "--workload", None, "its requests all arrive at once; no rate to scale")
    n_total = min(max_requests, len(trace))
    n_warmup = min(max(int(n_total * warmup_fraction), min_warmup), n_total - 2)
    n_measured = n_total - n_warmup
    if sizing == "head" or n_total == len(trace):
        start = 0
    else:
        start = densest_window(trace.arrival_s, n_measured, first_start=n_warmup)[0] - n_warmup
    piece = trace.take(np.arange(start, start + n_total))
    piece.arrival_s = piece.arrival_s - piece.arrival_s[0]
    measured_qps = _rate(piece.arrival_s[n_warmup:])
    if sizing == "head":
        reference_qps = mean_qps(piece)
        if reference_qps is None:
            raise InputError(trace.source or "--workload", None, "its first requests all arrive at once; no rate")
    else:
        reference_qps = whole_qps
    peak = measured_qps / whole_qps if measured_qps is not None else 1.0
    return SearchSlice(piece, reference_qps, n_warmup, sizing, peak, start, trace, warmup_fraction)


def peak_to_mean(trace: Trace, window_s: float) -> float | None:
    """The most arrivals in any `window_s` seconds (a window starting at an arrival), as a rate,
    over the mean rate; None when the trace has no rate or is shorter than the window."""
    whole_qps = mean_qps(trace)
    arrival_s = trace.arrival_s
    if whole_qps is None or arrival_s[-1] - arrival_s[0] < window_s:
        return None
    ends = np.searchsorted(arrival_s, arrival_s + window_s, side="left")
    return float((ends - np.arange(len(arrival_s))).max() / window_s / whole_qps)


def _rate(arrival_s: np.ndarray) -> float | None:
    if len(arrival_s) < 2 or arrival_s[-1] <= arrival_s[0]:
        return None
    return (len(arrival_s) - 1) / float(arrival_s[-1] - arrival_s[0])


PEAK_WINDOW_S = 60.0  # peak-to-mean is reported over one-minute windows at the target rate


def workload_shape(trace: Trace, piece: SearchSlice, target_qps: float) -> dict:
    """Mean rate, peak-to-mean (one-minute windows at the target rate) and the sizing slice."""
    whole_qps = mean_qps(trace)
    window_native_s = PEAK_WINDOW_S * target_qps / whole_qps if whole_qps else None
    return {"n_requests": len(trace), "mean_qps": whole_qps,
            "peak_to_mean_60s_at_target": peak_to_mean(trace, window_native_s) if window_native_s else None,
            "slice": piece.to_dict()}
