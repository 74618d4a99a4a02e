"""The plan's lines about what did not make it: skipped (cannot run), infeasible (misses the SLOs at
every rate), and the one error line when no candidate can meet them."""

from __future__ import annotations

from sim.planner.candidates import Skipped
from sim.planner.evaluate import RatePoint, describe_binding
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


def impossible_line(searches: list, slo: PlanSLO, lowest_qps: float) -> str:
    """'not even X qps meets ...' naming the candidate that came closest."""
    def worst_ratio(s) -> float:
        point: RatePoint = s.outcome.limit_point
        return max([*point.ratios.values(), slo.goodput_min / max(point.goodput, 1e-12)])

    closest = min(searches, key=worst_ratio)
    return (f"no candidate meets the SLOs even at {lowest_qps:.3g} qps per replica; closest: "
            f"{closest.candidate.label}, {describe_binding(closest.outcome.limit_point, slo)}")
