"""`plan --uncertainty N`: the recommended cluster's capacity under N perturbed cost models.

The plan is found with the profile's point estimate of every efficiency. The cost model is only as
good as its fit, so for the RECOMMENDED candidate only, draw `n` cost-model time scales per op
class from the profile's uncertainty (`sim.run.intervals.perturbed_cost_scales`, the draws
`simulate --uncertainty` uses, seeded by the config's seed) and, under each draw:

  * rerun the per-replica rate search on the same sizing slice: the rate one replica sustains
    within the SLOs, and the replicas that rate implies for the target;
  * when the plan verified the cluster, replay the whole workload once more through the
    recommended number of replicas: whether it still meets the SLOs, the share of requests within
    all SLOs, and the P99s.

`plan.json` `recommended.uncertainty` holds p10/p50/p90 (`sim.run.intervals.band`) of each, the share
of draws in which the recommended cluster still passed, and the draws themselves. The plan itself
(which cluster, how many replicas) is unchanged: the band says how sure it is.
"""

from __future__ import annotations

import math

from sim.inputs.config import EngineConfig
from sim.inputs.workload.trace import Trace
from sim.planner.burst import SearchSlice, search_slice
from sim.planner.candidates import build_candidates
from sim.planner.evaluate import confirm_rate, evaluate_rate
from sim.planner.layouts import LayoutGrid
from sim.planner.search import search_max_rate
from sim.planner.slo import PlanSLO
from sim.planner.verify import P99_KEYS, verification_run
from sim.run.intervals import band, check_replays, perturbed_cost_scales

METHOD = ("p10/p50/p90 over cost-model draws (per-op-class time scales from the profile's uncertainty); "
          "per draw the per-replica rate search on the sizing slice and, if verified, one whole-workload run "
          "at the recommended replica count")


def recommended_config(base: EngineConfig, recommended: dict, layouts: bool = False) -> EngineConfig:
    """One replica of the recommended candidate, built by sim.planner.candidates as the plan built it
    (`layouts`: the plan searched layouts, whose knobs are among the row's)."""
    grid = LayoutGrid(max_replica_gpus=recommended["gpus_per_replica"]) if layouts else None  # plain + the row's knobs
    runnable, _ = build_candidates(base, [recommended["hardware"]], [recommended["tp"]], [recommended["policy"]],
                                   [dict(recommended["knobs"])], layouts=grid)
    return runnable[0].cfg


def draw_outcome(cfg: EngineConfig, scale: dict[str, float], piece: SearchSlice, slo: PlanSLO, search: dict,
                 start_qps: float, target_qps: float, trace: Trace, verify_replicas: int | None) -> dict:
    """Under one cost-model draw: the per-replica sustained rate and, if `verify_replicas`, the whole
    workload through that many replicas (runs in a worker)."""
    outcome = search_max_rate(lambda rate: evaluate_rate(cfg, piece, rate, slo, time_scale=scale),
                              start_qps, search["min_qps"], search["max_qps"],
                              confirm=lambda rate: confirm_rate(cfg, piece, rate, slo, time_scale=scale))
    draw = {"time_scale": scale, "max_qps_per_replica": outcome.max_qps,
            "replicas_estimated": None if outcome.max_qps is None else math.ceil(target_qps / outcome.max_qps)}
    if verify_replicas is not None:
        run = verification_run(cfg, trace, verify_replicas, target_qps, slo, time_scale=scale)
        draw |= {"passes": run["passes"], "within_all_slos": run["within_all_slos"], "p99_s": run["p99_s"]}
    return draw


def capacity_band(result: dict, base: EngineConfig, trace: Trace, slo: PlanSLO, settings, n: int,
                  run_tasks) -> dict:
    """`recommended.uncertainty` for a plan.json `result` (module docstring). `settings`: the plan's
    SearchSettings; `run_tasks(fn, arg_tuples)` -> results in order (a backend via planner.plan.run_on)."""
    check_replays(n)
    recommended = result["recommended"]
    cfg = recommended_config(base, recommended, result.get("layouts") is not None)
    piece = search_slice(trace, settings.max_requests, settings.warmup_fraction, settings.sizing)
    verify_replicas = recommended["replicas"] if recommended.get("verified") else None
    args = [(cfg, scale, piece, slo, result["search"], recommended["max_qps_per_replica"], result["target_qps"],
             trace, verify_replicas) for scale in perturbed_cost_scales(cfg, n)]
    draws = run_tasks(draw_outcome, args)
    out = {"n_draws": n, "seed": cfg.seed, "method": METHOD,
           "max_qps_per_replica": band(d["max_qps_per_replica"] for d in draws),
           "replicas_estimated": band(d["replicas_estimated"] for d in draws)}
    if verify_replicas is not None:
        out |= {"verified_replicas": verify_replicas,
                "passes_share": sum(d["passes"] for d in draws) / n,
                "within_all_slos": band(d["within_all_slos"] for d in draws),
                "p99_ms": {k: _ms(band(d["p99_s"][k] for d in draws)) for k in P99_KEYS}}
    return out | {"draws": draws}


def band_line(uncertainty: dict) -> str:
    """One printed line: the per-replica rate band and, if verified, the pass share and attainment band."""
    rate = uncertainty["max_qps_per_replica"]
    line = (f"uncertainty ({uncertainty['n_draws']} cost-model draws, p10/p50/p90): qps/replica "
            f"{_triple(rate)}, replicas estimated (busiest slice) {_triple(uncertainty['replicas_estimated'], '.0f')}")
    if "passes_share" in uncertainty:
        line += (f"; {uncertainty['verified_replicas']} replicas meet the SLOs in {uncertainty['passes_share']:.0%} "
                 f"of draws, within all SLOs {_triple(uncertainty['within_all_slos'], '.1%')}")
    return line


def _ms(triple: dict) -> dict:
    return {k: None if v is None else v * 1e3 for k, v in triple.items()}


def _triple(triple: dict, fmt: str = ".3g") -> str:
    return "/".join("-" if triple[k] is None else format(triple[k], fmt) for k in ("p10", "p50", "p90"))
