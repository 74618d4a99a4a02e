"""Is the run overloaded, and why were requests rejected: summary.json's `overload` and `rejections`.

Overload: when the offered load exceeds what the cluster serves, the queue grows for as long as the
trace lasts and every latency percentile measures the trace's length rather than the cluster. The
growth rate is the least-squares slope of each request's queue delay (scheduled - arrival) on its
arrival time, over the requests that were scheduled; `overloaded` when the queue grew by at least
QUEUE_GROWTH_WARN_S_PER_MIN seconds per minute of arrivals. A stable run has a slope near zero,
whatever its bursts: they drain.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping

import numpy as np

QUEUE_GROWTH_WARN_S_PER_MIN = 1.0  # a queue growing a second per minute never drains within a trace
MIN_REQUESTS = 20  # fewer scheduled requests give no meaningful slope


def queue_growth(table: Mapping[str, np.ndarray]) -> dict:
    """{"queue_growth_s_per_min", "offered_qps", "served_qps", "overloaded"} from a requests table
    (sim.run.summary.requests_columns). The slope is None with fewer than MIN_REQUESTS scheduled."""
    arrival = np.asarray(table["arrival_s"], dtype=float)
    delay = np.asarray(table["queue_delay_s"], dtype=float)
    scheduled = ~np.isnan(delay)
    slope = None
    if scheduled.sum() >= MIN_REQUESTS and np.ptp(arrival[scheduled]) > 0:
        slope = float(np.polyfit(arrival[scheduled], delay[scheduled], 1)[0]) * 60.0
    span_s = float(np.ptp(arrival)) if arrival.size > 1 else 0.0
    finished = np.asarray(table["status"]) == "FINISHED"
    finish = np.asarray(table["finish_s"], dtype=float)[finished] if "finish_s" in table else np.array([])
    served_span_s = float(finish.max() - arrival.min()) if finish.size else 0.0
    return {"queue_growth_s_per_min": slope,
            "offered_qps": arrival.size / span_s if span_s > 0 else None,
            "served_qps": int(finished.sum()) / served_span_s if served_span_s > 0 else None,
            "overloaded": slope is not None and slope >= QUEUE_GROWTH_WARN_S_PER_MIN}


def rejections(table: Mapping[str, np.ndarray]) -> dict:
    """{"n", "first_reason", "kinds"} over the rejected requests, first by finish time (when they were
    rejected); `kinds`: 'reason with numbers as N (count); ...', most common first (one flat string,
    so sweep rows keep one column)."""
    status = np.asarray(table["status"])
    rows = np.flatnonzero(status == "REJECTED")
    reasons = [str(table["reject_reason"][i]) for i in rows]
    if rows.size and "finish_s" in table:
        order = np.argsort(np.asarray(table["finish_s"], dtype=float)[rows], kind="stable")
        reasons = [reasons[i] for i in order]
    kinds = Counter(re.sub(r"\d+(\.\d+)?", "N", r) for r in reasons)
    return {"n": len(reasons), "first_reason": reasons[0] if reasons else None,
            "kinds": "; ".join(f"{kind} ({count})" for kind, count in kinds.most_common()) or None}


def overload_line(summary: dict) -> str | None:
    """The warning simulate and sweep print, or None for a stable run."""
    load = summary.get("overload") or {}
    if not load.get("overloaded"):
        return None
    rates = ""
    if load.get("offered_qps") and load.get("served_qps"):
        rates = f": {load['offered_qps']:.3g} req/s offered, {load['served_qps']:.3g} req/s served"
    return (f"warning: offered load exceeds capacity{rates}; the queue grew {load['queue_growth_s_per_min']:.3g} s "
            f"per minute, so the latencies measure the trace's length, not the cluster (lower --qps or add replicas)")
