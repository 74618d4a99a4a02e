"""A day cut into consecutive segments replayed at once (e.g. as Ray tasks): an approximation
for wall time on many workers, never a substitute for the whole-day replay.

A replay is one sequential simulation, so one day runs on one core however many there are.
Segment k covers whole hours [start_k, end_k) of the day and is replayed as a window
(`sim.fleet.day.run_day(..., offset_s)`: the day's own arrivals) from `warmup_s` before its start;
the warm-up hours are dropped, so each hour of the day is counted once, by one segment. What
differs from the whole day: a segment's fleet starts as the policy wants it then, warm and with
nothing queued `warmup_s` before its first hour (a backlog older than that, a cold start under
way, a failed replica in repair, the autoscaler's cooldowns are not carried over). Arrivals per
hour are exactly the day's; attainment, GPU-hours and $ are close where the fleet forgets its past
within the warm-up (check against a whole-day replay: bench/bench_day.py --only big --ray).
"""

from __future__ import annotations

import math

from sim.errors import InputError
from sim.fleet.screen import HOUR_S, Window, window_spec

COUNTS = ("n_arrived", "n_finished", "n_good", "n_lost", "n_rejected", "n_retried")


def segment_windows(spec, n_segments: int, warmup_s: float) -> list[tuple[Window, float]]:
    """(window, first counted second within it) per segment: whole hours split as evenly as they go."""
    n_hours = math.ceil(spec.workload.duration_s / HOUR_S)
    if not 1 <= n_segments <= n_hours:
        raise InputError("--segments", None, f"must be in [1, {n_hours}] (the day's hours); got {n_segments}")
    if warmup_s < 0 or warmup_s % HOUR_S or HOUR_S % spec.workload.chunk_s:
        raise InputError("--warmup-h", None, "whole hours, with workload.chunk_s dividing an hour")
    bounds = [round(k * n_hours / n_segments) for k in range(n_segments + 1)]
    out = []
    for first, end in zip(bounds[:-1], bounds[1:]):
        start_s = max(first * HOUR_S - warmup_s, 0.0)
        end_s = min(end * HOUR_S, spec.workload.duration_s)
        out.append((Window(f"hours {first}-{end}", start_s, end_s - start_s), first * HOUR_S - start_s))
    return out


def segment_tasks(spec, base_dir, windows: list[tuple[Window, float]]) -> list[tuple]:
    """`sim.fleet.replays.replay` arguments, one per segment."""
    return [(window_spec(spec, window), base_dir, window.offset_s) for window, _ in windows]


def merge_segments(spec, windows: list[tuple[Window, float]], results: list[dict]) -> dict:
    """The day's hours from each segment's counted hours, and totals over them."""
    hours = []
    for (window, keep_from_s), result in zip(windows, results):
        first_hour = round(window.offset_s / HOUR_S)
        for row in result["summary"]["hours"]:
            if row["hour"] * HOUR_S >= keep_from_s:
                hours.append({**row, "hour": first_hour + row["hour"]})
    totals = {name: sum(row[name] for row in hours) for name in COUNTS}
    attained = [row["slo_attainment"] for row in hours if row["slo_attainment"] is not None]
    return {
        **totals, "slo_attainment": totals["n_good"] / totals["n_arrived"] if totals["n_arrived"] else None,
        "hours_meeting_target": sum(a >= spec.attainment_target for a in attained), "n_hours": len(hours),
        "worst_hour_attainment": min(attained) if attained else None,
        "gpu_hours": sum(row["gpu_hours"] for row in hours),
        "dollars_per_day": sum(row["dollars"] for row in hours) * 86_400.0 / spec.workload.duration_s,
        "replicas_ready_max": max((row["replicas_ready_max"] or 0) for row in hours),
        "task_wall_s": [result["summary"]["wall_time_s"] for result in results],
        "worker_peak_rss_mib": max(result["summary"]["worker"]["peak_rss_mib"] for result in results),
        "hours": hours,
    }
