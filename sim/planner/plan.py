"""The capacity plan: per candidate, the highest rate one replica sustains; then replicas, GPUs and cost.

Each candidate is one hardware kind (a mixed cluster can be simulated with `replica_hardware`), searched on
its own, so searches run in parallel processes; the result does not depend on the worker count.
"""

from __future__ import annotations

import math
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from sim.config import EngineConfig
from sim.errors import InputError
from sim.planner.candidates import Candidate, Skipped, build_candidates
from sim.planner.estimate import start_qps
from sim.planner.evaluate import RatePoint, binding_constraint, describe_binding, evaluate_rate
from sim.planner.search import SearchOutcome, lattice_index, lattice_rate, search_max_rate
from sim.planner.slo import PlanSLO
from sim.trace import Trace
from sim.workload.transforms import mean_qps


@dataclass(frozen=True)
class SearchSettings:
    """How each candidate is searched. The slice is the workload's first `max_requests` requests,
    re-timed per rate; its first `warmup_fraction` warm the replica and are not judged. `start_qps`
    None: start each candidate at half its estimated saturation rate (sim.planner.estimate)."""

    max_requests: int = 1000
    warmup_fraction: float = 0.1
    start_qps: float | None = None
    min_qps: float = 1 / 128
    max_qps: float = 1024.0

    def to_dict(self) -> dict:
        return {"max_requests": self.max_requests, "warmup_fraction": self.warmup_fraction,
                "min_qps": lattice_rate(lattice_index(self.min_qps, math.ceil)),
                "max_qps": lattice_rate(lattice_index(self.max_qps, math.floor)),
                "rate_step": "x2^(1/16) (4.4%)"}


@dataclass
class CandidateSearch:
    candidate: Candidate
    outcome: SearchOutcome
    binding_slo: str
    binding_detail: str

    @property
    def feasible(self) -> bool:
        return self.outcome.max_qps is not None


def search_candidate(candidate: Candidate, slice_trace: Trace, slo: PlanSLO,
                     settings: SearchSettings) -> CandidateSearch:
    """The rate search of one candidate and what binds at its limit (runs in a worker process)."""
    start = settings.start_qps or start_qps(candidate.cfg, slice_trace)
    outcome = search_max_rate(
        lambda rate: evaluate_rate(candidate.cfg, slice_trace, rate, slo, settings.warmup_fraction),
        start, settings.min_qps, settings.max_qps)
    if outcome.hit_ceiling:
        return CandidateSearch(candidate, outcome, "rate_ceiling",
                               f"meets the SLOs up to the search ceiling, {outcome.max_qps:.3g} qps")
    detail = describe_binding(outcome.limit_point, slo)
    if outcome.max_qps is None:
        detail = f"not even the lowest rate meets the SLOs: {detail}"
    return CandidateSearch(candidate, outcome, binding_constraint(outcome.limit_point, slo), detail)


def run_searches(candidates: list[Candidate], slice_trace: Trace, slo: PlanSLO, settings: SearchSettings,
                 workers: int) -> list[CandidateSearch]:
    """All candidates' searches, in candidate order; `workers` > 1 uses that many processes."""
    args = ([slice_trace] * len(candidates), [slo] * len(candidates), [settings] * len(candidates))
    if workers <= 1 or len(candidates) <= 1:
        return list(map(search_candidate, candidates, *args))
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(search_candidate, candidates, *args))


def costed(search: CandidateSearch, target_qps: float, mean_output_tokens: float) -> dict:
    """The plan.json row of a feasible candidate at `target_qps`."""
    cfg, max_qps = search.candidate.cfg, search.outcome.max_qps
    replicas = math.ceil(target_qps / max_qps)
    gpus = replicas * cfg.tp
    cost_per_hour = gpus * search.candidate.cost_per_gpu_hour_usd
    return {
        "hardware": cfg.hardware, "tp": cfg.tp, "policy": cfg.policy,
        "max_qps_per_replica": max_qps, "replicas": replicas, "gpus": gpus,
        "cost_per_hour_usd": cost_per_hour,
        "usd_per_m_output_tokens": cost_per_hour / (target_qps * mean_output_tokens * 3600) * 1e6,
        "binding_slo": search.binding_slo, "binding_detail": search.binding_detail,
        "search_points": [p.to_dict() for p in search.outcome.points],
    }


def make_plan(trace: Trace, base: EngineConfig, hardware: list[str], tps: list[int], policies: list[str],
              slo: PlanSLO, target_qps: float, settings: SearchSettings = SearchSettings(), workers: int = 1) -> dict:
    """The plan.json content: feasible candidates cheapest first (ties: fewer GPUs), the recommended
    one, and those skipped (cannot run) or infeasible (miss the SLOs even at the lowest rate).
    Raises InputError when no candidate can run, or none meets the SLOs at any rate."""
    if not (target_qps > 0 and math.isfinite(target_qps)):
        raise InputError("--target-qps", None, f"must be a number > 0; got {target_qps}")
    slice_trace = workload_slice(trace, settings.max_requests)
    candidates, skipped = build_candidates(base, hardware, tps, policies)
    if not candidates:
        raise InputError("--hardware/--tp", None, "no candidate can run: " + _reasons(skipped))
    searches = run_searches(candidates, slice_trace, slo, settings, workers)
    feasible = [s for s in searches if s.feasible]
    if not feasible:
        raise InputError("--slo", None, _impossible_line(searches, slo, settings))
    mean_output_tokens = float((trace.output_tokens * trace.samples()).mean())
    rows = sorted((costed(s, target_qps, mean_output_tokens) for s in feasible),
                  key=lambda r: (r["cost_per_hour_usd"], r["gpus"], r["hardware"], r["tp"], r["policy"]))
    return {
        "model": base.model, "workload": trace.source, "target_qps": target_qps,
        "mean_output_tokens": mean_output_tokens, "slo": slo.to_dict(), "search": settings.to_dict(),
        "candidates": rows, "recommended": rows[0],
        "infeasible": [_infeasible_row(s) for s in searches if not s.feasible],
        "skipped": [s.to_dict() for s in skipped],
    }


def workload_slice(trace: Trace, max_requests: int) -> Trace:
    """The first `max_requests` requests, which every rate of the search re-times."""
    if max_requests < 20:
        raise InputError("--max-requests", None, f"must be >= 20 to judge percentiles; got {max_requests}")
    head = trace.take(range(min(max_requests, len(trace))))
    if mean_qps(head) is None:
        raise InputError(trace.source or "--workload", None, "its first requests all arrive at once; no rate to scale")
    return head


def _infeasible_row(search: CandidateSearch) -> dict:
    cfg = search.candidate.cfg
    return {"hardware": cfg.hardware, "tp": cfg.tp, "policy": cfg.policy, "binding_slo": search.binding_slo,
            "reason": search.binding_detail,
            "search_points": [p.to_dict() for p in search.outcome.points]}


def _reasons(skipped: list[Skipped]) -> str:
    """'h100-sxm tp1: does not fit: ... 71.7 GiB usable; ...' once per hardware and TP, hints once at the end."""
    hint = " (raise --tp"
    by_label = {f"{s.hardware} tp{s.tp}": s.reason.split(hint)[0] for s in skipped}
    line = "; ".join(f"{label}: {reason}" for label, reason in by_label.items())
    if any(hint in s.reason for s in skipped):
        line += "; raise --tp or --gpu-memory-utilization, or use a smaller dtype"
    return line


def _impossible_line(searches: list[CandidateSearch], slo: PlanSLO, settings: SearchSettings) -> str:
    """'not even X qps meets ...' naming the candidate that came closest."""
    def worst_ratio(s: CandidateSearch) -> float:
        point: RatePoint = s.outcome.limit_point
        return max([*point.ratios.values(), slo.goodput_min / max(point.goodput, 1e-12)])

    closest = min(searches, key=worst_ratio)
    lowest = settings.to_dict()["min_qps"]
    return (f"no candidate meets the SLOs even at {lowest:.3g} qps per replica; closest: "
            f"{closest.candidate.label}, {describe_binding(closest.outcome.limit_point, slo)}")
