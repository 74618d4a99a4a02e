"""The capacity plan: size each candidate on the workload's busiest stretch, cost it, then VERIFY the
cheapest ones by replaying the whole workload through the whole cluster, adding replicas until the
SLOs hold; recommend the cheapest verified cluster.

Candidates (hardware x TP x policy x searched engine knobs) are searched independently, so they run
on a backend (local processes or Ray, as `sweep`); the plan does not depend on which backend or how
many workers ran it: verification proceeds in fixed rounds of `verify_batch` candidates. A verification
run stops as soon as it is certain to fail (sim.planner.early_stop); its record says so in
`stopped_early` (when, why, how many requests had ended) and judges those requests.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from sim.errors import InputError
from sim.inputs.budget import check_rate_qps
from sim.inputs.config import EngineConfig
from sim.inputs.workload.trace import Trace
from sim.planner.burst import SearchSlice, search_slice, workload_shape
from sim.planner.candidates import Candidate, build_candidates, drop_radix_twins
from sim.planner.defaults import preferred_policy, weights_section
from sim.planner.disagg import compare_layouts
from sim.planner.disagg_layouts import choose_groups, groups_section, split_base
from sim.planner.energy import PlanPower, add_row_energy, plan_energy_keys
from sim.planner.estimate import start_qps
from sim.planner.evaluate import binding_constraint, confirm_rate, describe_binding, evaluate_rate
from sim.planner.knobs import best_per_hardware_tp, knob_settings, operating_points, pareto_frontier
from sim.planner.launch import launch_command
from sim.planner.layouts import LayoutGrid, layout_fields, whole_nodes
from sim.planner.report import impossible_line, infeasible_row, reasons_line
from sim.planner.rows import Progress, check_cluster_size, recommend, row_order, run_on
from sim.planner.screen import screen
from sim.planner.search import SearchOutcome, lattice_index, lattice_rate, search_max_rate
from sim.planner.slo import PlanSLO
from sim.planner.trust import trust_section
from sim.planner.verify import VerifyTask
from sim.planner.verify_bound import (
    collapse_identical,
    mark_ties,
    run_verifications,
    verified_per_hardware,
    verify_by_bound,
)
from sim.run.backends import LocalBackend
from sim.run.energy_summary import DEFAULT_PUE, DEFAULT_USD_PER_KWH
from sim.run.provenance import provenance


@dataclass(frozen=True)
class SearchSettings:
    """How candidates are sized and verified. The slice: `max_requests` requests chosen by `sizing`
    (sim.planner.burst), the first `warmup_fraction` not judged. `start_qps` None: start each search
    at half its estimated saturation rate. Verification: the cheapest candidates, `verify_batch`
    at a time, at most `max_verified` of them, each at most `max_verify_runs` whole-workload runs."""

    max_requests: int = 1000
    warmup_fraction: float = 0.1
    start_qps: float | None = None
    min_qps: float = 1 / 128
    max_qps: float = 1024.0
    sizing: str = "busiest"
    verify: bool = True
    verify_batch: int = 2
    max_verified: int = 12
    max_verify_runs: int = 6
    screen_keep: int | None = None  # size only this many candidates per hardware (sim.planner.screen); None: all

    def to_dict(self) -> dict:
        return {"max_requests": self.max_requests, "warmup_fraction": self.warmup_fraction, "sizing": self.sizing,
                "min_qps": lattice_rate(lattice_index(self.min_qps, math.ceil)),
                "max_qps": lattice_rate(lattice_index(self.max_qps, math.floor)),
                "rate_step": "x2^(1/16) (4.4%)", "verify": self.verify, "verify_batch": self.verify_batch,
                "max_verified": self.max_verified, "max_verify_runs": self.max_verify_runs,
                "screen_keep": self.screen_keep}


@dataclass
class CandidateSearch:
    candidate: Candidate
    outcome: SearchOutcome
    binding_slo: str
    binding_detail: str

    @property
    def feasible(self) -> bool:
        return self.outcome.max_qps is not None


def search_candidate(candidate: Candidate, piece: SearchSlice, slo: PlanSLO,
                     settings: SearchSettings) -> CandidateSearch:
    """The rate search of one candidate and what binds at its limit (runs in a worker)."""
    start = settings.start_qps or start_qps(candidate.cfg, piece.trace) / piece.peak_to_mean
    outcome = search_max_rate(lambda rate: evaluate_rate(candidate.cfg, piece, rate, slo),
                              start, settings.min_qps, settings.max_qps,
                              confirm=lambda rate: confirm_rate(candidate.cfg, piece, rate, slo))
    if outcome.hit_ceiling:
        return CandidateSearch(candidate, outcome, "rate_ceiling",
                               f"meets the SLOs up to the search ceiling, {outcome.max_qps:.3g} qps")
    detail = describe_binding(outcome.limit_point, slo)
    if outcome.max_qps is None:
        detail = f"not even the lowest rate meets the SLOs: {detail}"
    return CandidateSearch(candidate, outcome, binding_constraint(outcome.limit_point, slo), detail)


def costed(search: CandidateSearch, replicas: int, target_qps: float, mean_tokens: tuple[float, float]) -> dict:
    """The plan.json row of a feasible candidate with `replicas` replicas at `target_qps`;
    `mean_tokens`: (input, output) tokens per request. Cost per GPU (a replica's GPUs follow its
    layout); `nodes` and the whole-node GPUs and cost when replicas are packed on the profile's
    nodes (sim.planner.layouts.whole_nodes)."""
    cfg, candidate = search.candidate.cfg, search.candidate
    mean_input_tokens, mean_output_tokens = mean_tokens
    gpus = replicas * candidate.n_gpus
    cost_per_hour = candidate.cost_per_hour_usd(replicas)  # the GPUs billed (sim.planner.billing)
    nodes = whole_nodes(replicas, candidate.n_gpus, candidate.gpus_per_node)
    tokens_per_hour = target_qps * 3600
    return {
        "hardware": cfg.hardware, "tp": cfg.tp, "policy": cfg.policy, "knobs": dict(candidate.knobs),
        "layout": layout_fields(cfg), "gpus_per_replica": candidate.n_gpus,
        "max_qps_per_replica": search.outcome.max_qps, "replicas": replicas, "gpus": gpus,
        "cost_per_hour_usd": cost_per_hour, "billing": candidate.billing.to_dict(replicas, candidate.n_gpus),
        "nodes": nodes, "gpus_per_node": candidate.gpus_per_node,
        "whole_node_cost_per_hour_usd": nodes * candidate.gpus_per_node * candidate.cost_per_gpu_hour_usd,
        "usd_per_m_output_tokens": cost_per_hour / (tokens_per_hour * mean_output_tokens) * 1e6,
        "usd_per_m_total_tokens": cost_per_hour / (tokens_per_hour * (mean_input_tokens + mean_output_tokens)) * 1e6,
        "binding_slo": search.binding_slo, "binding_detail": search.binding_detail,
        "search_points": [p.to_dict() for p in search.outcome.points],
        "engine_config": cfg.model_dump(mode="json"),  # one replica as simulated: rerun it with EngineConfig(**this)
    }


def make_plan(trace: Trace, base: EngineConfig, hardware: list[str], tps: list[int], policies: list[str],
              slo: PlanSLO, target_qps: float, settings: SearchSettings = SearchSettings(), workers: int = 1,
              backend=None, knob_grid: dict[str, list] | None = None, progress: Progress | None = None,
              pd_ratios: list[tuple[int, int]] | None = None, announce: Callable[[], None] | None = None,
              model_id: str | None = None, prices: dict[str, float] | None = None,
              layouts: LayoutGrid | None = None, billing: dict[str, str] | None = None,
              electricity: tuple[float, float] = (DEFAULT_USD_PER_KWH, DEFAULT_PUE),
              power_budget_kw: float | None = None) -> dict:
    """The plan.json content (see the module docstring). `backend`: a sim.run.backends backend
    (default: `workers` local processes). Raises InputError when no candidate can run, or none
    meets the SLOs at any rate. `recommended` is None when no verified cluster met the SLOs.
    `pd_ratios`: also compare disaggregated P:D layouts of the recommendation (sim.planner.disagg).
    A backend passed in is left open (the caller closes it); one made here is closed here. `announce`:
    called once the candidates are built, before the first simulation (the CLI prints the SLOs).
    `model_id`: the checkpoint the launch command serves (default: the model spec's hf_name).
    `prices`: $ per GPU-hour by profile name, overriding the profiles' cost_per_hour_usd.
    `billing`: billing unit by profile name, overriding the profiles' (sim.planner.billing).
    `layouts`: also search each TP's PP / EP / DP-attention layouts (sim.planner.layouts); with it,
    or with `settings.screen_keep`, candidates are screened first (sim.planner.screen). `electricity`:
    ($ per kWh, PUE) for the rows' `energy`; `power_budget_kw`: recommend the cheapest verified cluster
    within it (sim.planner.energy)."""
    if backend is None:
        with LocalBackend(max(1, workers)) as local:
            return make_plan(trace, base, hardware, tps, policies, slo, target_qps, settings, workers, local, knob_grid,
                             progress, pd_ratios, announce, model_id, prices, layouts, billing, electricity,
                             power_budget_kw)
    check_rate_qps(target_qps, "--target-qps")
    if pd_ratios and not settings.verify:
        raise InputError("--disagg", None, "compares verified clusters; drop --no-verify")
    piece = search_slice(trace, settings.max_requests, settings.warmup_fraction, settings.sizing)
    candidates, skipped = build_candidates(base, hardware, tps, policies, knob_settings(knob_grid or {}), prices,
                                           layouts, billing)
    candidates, twins = drop_radix_twins(candidates, trace.has_hash_ids, preferred_policy(base))
    candidates, same = collapse_identical(candidates)
    skipped += twins + same
    screen_section, estimates = None, []
    if layouts is not None or settings.screen_keep is not None:
        candidates, unpriced, screen_section, estimates = screen(candidates, trace, slo, target_qps,
                                                                 settings.screen_keep)
        skipped += unpriced
    if not candidates:
        raise InputError("--hardware/--tp", None, "no candidate can run: " + reasons_line(skipped))
    if announce is not None:
        announce()
    searches = run_on(backend, search_candidate, [(c, piece, slo, settings) for c in candidates], progress,
                      "sizing candidates")
    feasible = [s for s in searches if s.feasible]
    if not feasible:
        raise InputError("--slo", None, impossible_line(searches, slo, settings.to_dict()["min_qps"],
                                                        piece.trace.arrival_s))
    mean_output_tokens = float((trace.output_tokens * trace.samples()).mean())
    mean_tokens = (float(trace.prompt_tokens.mean()), mean_output_tokens)
    rows = [costed(s, math.ceil(target_qps / s.outcome.max_qps), target_qps, mean_tokens) for s in feasible]
    check_cluster_size(rows, target_qps)
    power = PlanPower(target_qps, mean_output_tokens, electricity, power_budget_kw)
    add_row_energy(rows, target_qps, mean_output_tokens, electricity)  # from the sizing runs until verified
    preferred = preferred_policy(base)
    order = sorted(range(len(rows)), key=lambda i: row_order(rows[i], preferred))
    rows, feasible = [rows[i] for i in order], [feasible[i] for i in order]
    order_section = None
    if settings.verify:
        peak = piece.peak_to_mean if settings.sizing == "busiest" else 1.0
        order_section = verify_cheapest(rows, feasible, trace, target_qps, slo, settings, backend, progress,
                                        mean_tokens, peak, power)
    rows.sort(key=lambda r: (r.get("verified") is not True if settings.verify else False, *row_order(r, preferred)))
    recommended = recommend(rows, settings.verify, target_qps, power.fits)
    mark_ties(rows, recommended)
    recommended_cfg = None if recommended is None else _config_of(recommended, feasible)
    return {
        **provenance(base, trace), "model": base.model, "weight_dtype": weights_section(base),
        "workload": trace.source, "target_qps": target_qps,
        "mean_output_tokens": mean_output_tokens, "slo": slo.to_dict(), "search": settings.to_dict(),
        "workload_shape": workload_shape(trace, piece, target_qps),
        "layouts": None if layouts is None else layouts.to_dict(), "screen": screen_section,
        "candidates": rows, "recommended": recommended,
        "launch": None if recommended is None else launch_command(recommended_cfg, recommended["replicas"], model_id),
        "trust": None if recommended is None else trust_section(recommended_cfg),
        "prices_usd_per_gpu_hour": {c.cfg.hardware: {"usd": c.cost_per_gpu_hour_usd,
                                                     "from": "--price" if c.cfg.hardware in (prices or {}) else
                                                     "profile cost_per_hour_usd"} for c in candidates},
        "best_per_hardware_tp": best_per_hardware_tp(rows) if knob_grid else None,
        "verification_order": order_section,
        "verified_per_hardware": verified_per_hardware(rows) if settings.verify else None,
        "pareto": pareto_frontier(points := operating_points(rows)),
        "pareto_per_dollar": pareto_frontier(points, "tok_per_usd"),
        **plan_energy_keys(rows, recommended, electricity, power_budget_kw, points),
        "infeasible": [infeasible_row(s) for s in searches if not s.feasible],
        "skipped": [s.to_dict() for s in skipped],
        "disaggregated": None if not pd_ratios else _disaggregated(recommended, feasible, pd_ratios, trace, target_qps,
                                                                    slo, settings, backend, progress,
                                                                    estimates if layouts is not None else None,
                                                                    prices, model_id),
    }


def _disaggregated(recommended: dict | None, searches: list[CandidateSearch], pd_ratios: list[tuple[int, int]],
                   trace: Trace, target_qps: float, slo: PlanSLO, settings: SearchSettings, backend,
                   progress: Progress | None, estimates: list | None = None,
                   prices: dict[str, float] | None = None, model_id: str | None = None) -> dict:
    """plan.json's `disaggregated` section: the recommendation vs its P:D layouts; with `estimates`
    (a layout search) the prefill and decode groups take their own layouts (sim.planner.disagg_layouts);
    `model_id`: the checkpoint the groups' launch lines serve."""
    if recommended is None:
        return {"compared": False, "reason": "no verified aggregated recommendation to compare against"}
    cfg, groups = _config_of(recommended, searches), None
    if estimates:
        groups = choose_groups(recommended["hardware"], recommended["policy"], estimates)
        if groups is None:
            return {"compared": False, "reason": f"no layout of {recommended['hardware']} to disaggregate (each group "
                                                 "needs one without PP whose estimate is finite)"}
        cfg = split_base(groups)
    section = compare_layouts(recommended, cfg, pd_ratios, trace, target_qps, slo, settings.max_verify_runs,
                              lambda fn, tasks: run_on(backend, fn, tasks, progress, "verifying P:D layouts"), prices,
                              model_id)
    return section if groups is None else {**section, "groups": groups_section(groups)}


def _burst_guess(row: dict, target_qps: float, peak_to_mean: float) -> int:
    """Replicas if each one carried its busiest-slice rate all the time (the slice is sized for the
    workload's peak; its replicas do not all see that peak at once): where verification starts."""
    return max(1, math.ceil(target_qps / (row["max_qps_per_replica"] * max(peak_to_mean, 1.0)) - 1e-9))


def verify_cheapest(rows: list[dict], searches: list[CandidateSearch], trace: Trace, target_qps: float,
                    slo: PlanSLO, settings: SearchSettings, backend, progress: Progress | None,
                    mean_tokens: tuple[float, float], peak: float = 1.0, power: PlanPower | None = None) -> dict:
    """Verify rows by lower bound until the cheapest verified cluster is exact (sim.planner.verify_bound);
    mutates each verified row: `verified`, `verification` (every run its search used),
    `verification_runs_unused`, `replicas_estimated`, and replicas/GPUs/cost (and `energy`, with `power`)
    as verified; under `power`'s budget a verified row counts as found only within it. Returns
    plan.json's `verification_order`."""
    guesses = [min(row["replicas"], _burst_guess(row, target_qps, peak)) for row in rows]

    def make_task(i: int, floor: int, guess: int) -> VerifyTask:
        return VerifyTask(searches[i].candidate.cfg, rows[i]["replicas"], settings.max_verify_runs, guess, floor)

    def recost(i: int, replicas: int) -> dict:
        fields = ("replicas", "gpus", "cost_per_hour_usd", "billing", "nodes", "whole_node_cost_per_hour_usd",
                  "usd_per_m_output_tokens", "usd_per_m_total_tokens")
        fields = {k: v for k, v in costed(searches[i], replicas, target_qps, mean_tokens).items() if k in fields}
        return fields if power is None else {**fields, **power.recost({**rows[i], **fields})}

    run_batch = run_verifications(trace, target_qps, slo, lambda fn, args: run_on(
        backend, fn, args, progress, "verifying on the whole workload"))
    return verify_by_bound(rows, [s.candidate for s in searches], guesses, settings.max_verified,
                           settings.verify_batch, make_task, run_batch, recost,
                           None if power is None else power.fits)


def _config_of(row: dict, searches: list[CandidateSearch]) -> EngineConfig:
    for s in searches:
        c = s.candidate
        if (c.cfg.hardware, c.cfg.tp, c.cfg.policy, dict(c.knobs)) == (row["hardware"], row["tp"], row["policy"],
                                                                        row["knobs"]):
            return c.cfg
    raise KeyError(row["hardware"])
