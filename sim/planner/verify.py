"""Verify a sized cluster: replay the WHOLE workload at the target rate through all its replicas
behind the router, judge every request against the SLOs, and add replicas until they hold.

The per-replica search runs on a slice; this run is what a deployment would see (every burst of the
workload, the router's imbalance, the cold start). A candidate passes when `sim.slo.slo_report`
says `met` over all requests.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.config import EngineConfig
from sim.planner.slo import PlanSLO
from sim.simulate import simulate
from sim.slo import slo_report
from sim.summary import requests_frame
from sim.trace import Trace
from sim.workload.transforms import scale_rate

P99_KEYS = ("ttft", "tpot", "e2e")


@dataclass(frozen=True)
class VerifyTask:
    """One candidate's verification: start at `replicas`, add one at a time, at most `max_runs` runs."""

    cfg: EngineConfig  # one replica of the candidate (replicas is set per run)
    replicas: int
    max_runs: int


def verification_run(cfg: EngineConfig, trace: Trace, replicas: int, target_qps: float, slo: PlanSLO) -> dict:
    """One whole-workload run on `replicas` replicas; the plan.json record of it."""
    cluster = EngineConfig.model_validate({**cfg.model_dump(), "replicas": replicas})
    result = simulate(cluster, scale_rate(trace, target_qps=target_qps, where="--target-qps"))
    frame = requests_frame(result)
    report = slo_report(frame, slo, result.sim_duration_s)
    finished = frame[frame["status"] == "FINISHED"]
    p99_s = {}
    for metric in P99_KEYS:
        values = finished[f"{metric}_s"].dropna()
        p99_s[metric] = float(values.quantile(0.99)) if len(values) else None
    return {
        "replicas": replicas, "gpus": replicas * cfg.tp, "router": cfg.router, "passes": report["met"],
        "n_requests": len(frame), "n_finished": len(finished), "sim_duration_s": result.sim_duration_s,
        "p99_s": p99_s, "p99_ms": {k: None if v is None else v * 1e3 for k, v in p99_s.items()},
        "attainment": {key: v["attainment"] for key, v in report["per_slo"].items()},
        "within_all_slos": report["goodput"]["fraction"], "slo": report["per_slo"],
        "finished_share": report["finished_share"],
    }


def verify_candidate(task: VerifyTask, trace: Trace, target_qps: float, slo: PlanSLO) -> list[dict]:
    """Whole-workload runs around the estimate `task.replicas`: while failing, one replica more
    each time; once the first run passes, one fewer each time while that still passes (the estimate
    from the busiest slice may be generous). At most `task.max_runs` runs; returns every run in
    order. The verified size is `verified_replicas(runs)`."""
    runs = [verification_run(task.cfg, trace, task.replicas, target_qps, slo)]
    step = -1 if runs[0]["passes"] else 1
    while len(runs) < task.max_runs:
        replicas = runs[-1]["replicas"] + step
        if replicas < 1 or (step < 0 and not runs[-1]["passes"]) or (step > 0 and runs[-1]["passes"]):
            break
        runs.append(verification_run(task.cfg, trace, replicas, target_qps, slo))
    return runs


def verified_replicas(runs: list[dict]) -> int | None:
    """The fewest replicas among the passing runs (None: none passed)."""
    passing = [run["replicas"] for run in runs if run["passes"]]
    return min(passing) if passing else None
