"""GPU-hours and dollars of a day, per hour and in total, and the day's summary.

A replica is billed from its launch (cold start included) to its stop (drained, cancelled or
failed), clipped to [0, duration_s]. Reserved GPUs are paid every hour of the day whether used or
not (`reserved_replicas` x GPUs per replica); on-demand and spot replicas only while alive.
"""

from __future__ import annotations

import math

import numpy as np

from sim.fleet.facts import Prices


def gpu_hours_by_hour(result) -> dict[str, np.ndarray]:
    """Alive GPU-hours per hour of the day, by kind (reserved, on_demand, spot)."""
    duration_s = result.spec.workload.duration_s
    n_hours = result.tally.n_hours
    starts = np.arange(n_hours) * 3600.0
    ends = np.minimum(starts + 3600.0, duration_s)
    out = {kind: np.zeros(n_hours) for kind in ("reserved", "on_demand", "spot")}
    for fr in result.replicas:
        stop_s = duration_s if fr.stop_s is None else min(fr.stop_s, duration_s)
        overlap_s = np.clip(np.minimum(ends, stop_s) - np.maximum(starts, fr.launch_s), 0.0, None)
        out[fr.kind] += overlap_s * result.gpus_per_replica / 3600.0
    return out


def dollars_by_hour(result, prices: Prices) -> dict[str, np.ndarray]:
    """$ per hour: reserved (the whole base, every hour), on-demand and spot (alive hours)."""
    alive = gpu_hours_by_hour(result)
    duration_s = result.spec.workload.duration_s
    starts_s = np.arange(result.tally.n_hours) * 3600.0
    hours = np.minimum(starts_s + 3600.0, duration_s) - starts_s
    reserved_gpus = result.spec.fleet.pricing.reserved_replicas * result.gpus_per_replica
    return {"reserved": reserved_gpus * hours / 3600.0 * prices.reserved,
            "on_demand": alive["on_demand"] * prices.on_demand, "spot": alive["spot"] * prices.spot}


def summary(result, prices: Prices) -> dict:
    """The day's summary.json: totals, per-hour rows, cold start, replicas, cost."""
    alive, dollars = gpu_hours_by_hour(result), dollars_by_hour(result, prices)
    hours = result.tally.hours()
    timeline = result.timeline
    t_s = np.asarray(timeline["t_s"])
    for row in hours:
        inside = (t_s >= row["hour"] * 3600.0) & (t_s < row["hour"] * 3600.0 + 3600.0)
        ready = np.asarray(timeline["ready"])[inside]
        row["replicas_ready_mean"] = float(ready.mean()) if ready.size else None
        row["replicas_ready_max"] = int(ready.max()) if ready.size else None
        row["gpu_hours"] = float(sum(alive[kind][row["hour"]] for kind in alive))
        row["dollars"] = float(sum(dollars[kind][row["hour"]] for kind in dollars))
    attained = [row["slo_attainment"] for row in hours if row["slo_attainment"] is not None]
    target = result.spec.attainment_target
    totals = result.tally.totals()
    return {
        "duration_s": result.spec.workload.duration_s, "sim_end_s": result.sim_end_s, "wall_time_s": result.wall_time_s,
        **totals,
        "slo": result.spec.slo.model_dump(exclude_none=True), "attainment_target": target,
        "hours_meeting_target": sum(a >= target for a in attained), "n_hours": len(hours),
        "worst_hour_attainment": min(attained) if attained else None,
        "gpu_hours": float(sum(a.sum() for a in alive.values())),
        "gpu_hours_by_kind": {kind: float(a.sum()) for kind, a in alive.items()},
        "dollars_per_day": float(sum(d.sum() for d in dollars.values())) * 86_400.0 / result.spec.workload.duration_s,
        "dollars": {kind: float(d.sum()) for kind, d in dollars.items()},
        "prices_per_gpu_h": prices.model_dump(),
        "cold_start_s": result.cold_start,
        "replicas_launched": len(result.replicas), "failures": result.n_failures,
        "replicas_ready_max": int(max(timeline["ready"])) if timeline["ready"] else 0,
        "peak_requests_in_flight": result.peak_in_flight, "request_table_rows": result.table_rows,
        "model": result.cfg.model, "hardware": result.cfg.hardware, "tp": result.cfg.tp, "engine": result.cfg.engine,
        "hours": hours,
        "minutes": None if result.minute_tally is None else result.minute_tally.hours(),
    }


def fmt(value, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)
