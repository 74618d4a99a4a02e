"""The plan's lines about what did not make it: skipped (cannot run), infeasible (misses the SLOs at
every rate), and the one error line when no candidate can meet them."""

from __future__ import annotations

from sim.planner.candidates import Skipped
from sim.planner.evaluate import RatePoint, binding_constraint, describe_binding
from sim.planner.slo import PlanSLO


def infeasible_row(search) -> dict:
    cfg = search.candidate.cfg
    return {"hardware": cfg.hardware, "tp": cfg.tp, "policy": cfg.policy, "knobs": dict(search.candidate.knobs),
            "binding_slo": search.binding_slo, "reason": search.binding_detail,
            "search_points": [p.to_dict() for p in search.outcome.points]}


def reasons_line(skipped: list[Skipped]) -> str:
    """'h100-sxm tp1: does not fit: ... 71.7 GiB usable; ...' once per hardware and TP, hints once at the end."""
    hint = " (raise --tp"
    by_label = {f"{s.hardware} tp{s.tp}": s.reason.split(hint)[0] for s in skipped}
    line = "; ".join(f"{label}: {reason}" for label, reason in by_label.items())
    if any(hint in s.reason for s in skipped):
        line += "; raise --tp or --gpu-memory-utilization, or use a smaller dtype"
    return line


def impossible_line(searches: list, slo: PlanSLO, lowest_qps: float, arrival_s=None) -> str:
    """'not even X qps meets ...' naming the candidate that came closest, and the cause when the
    workload's arrivals come in simultaneous groups (`arrival_s`: the sizing slice's arrival times),
    which re-timing to a lower rate keeps together."""
    def worst_ratio(s) -> float:
        point: RatePoint = s.outcome.limit_point
        return max([*point.ratios.values(), slo.goodput_min / max(point.goodput, 1e-12)])

    closest = min(searches, key=worst_ratio)
    line = (f"no candidate meets the SLOs even at {lowest_qps:.3g} qps per replica; closest: "
            f"{closest.candidate.label}, {describe_binding(closest.outcome.limit_point, slo)}")
    latency_bound = binding_constraint(closest.outcome.limit_point, slo) not in ("kv_capacity", "goodput")
    return line + (_burst_cause(arrival_s) if latency_bound else "")


def _burst_cause(arrival_s) -> str:
    """'; cause: its 200 requests arrive on 20 timestamps, up to 28 at once ...' or '' (no such groups)."""
    if arrival_s is None or len(arrival_s) < 2:
        return ""
    import numpy as np

    _, counts = np.unique(np.asarray(arrival_s), return_counts=True)
    if counts.max() < 2 or len(counts) > 0.5 * len(arrival_s):
        return ""
    return (f"; cause: the sizing slice's {len(arrival_s)} requests arrive on only {len(counts)} distinct timestamps "
            f"(up to {counts.max()} at the same instant), and re-timing to a lower rate keeps each group together, so "
            f"every rate sees bursts of {counts.max()} (simulate --qps gives Poisson arrivals with the same lengths)")
