"""Aggregated vs disaggregated prefill/decode under the plan's SLOs and cost.

For the recommended cluster's hardware x TP x policy (and knobs), each P:D ratio is scaled up to
k*P prefill + k*D decode replicas, k the smallest whose whole-workload run at the target rate meets
every SLO (searched like the aggregated verification, `sim.planner.verify.fewest_passing`, judged
by the same `judged_run`), and costed from the profiles' `cost_per_hour_usd`. The section says which
layout is cheapest; on a tie the aggregated cluster wins (nothing to transfer, simpler to run).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sim.engine.disagg.build import group_config
from sim.errors import InputError
from sim.inputs.config import EngineConfig
from sim.inputs.hardware import load_hardware
from sim.inputs.layout.config import group_layout
from sim.inputs.workload.trace import Trace
from sim.planner.launch_disagg import group_launch_lines
from sim.planner.layouts import layout_label
from sim.planner.slo import PlanSLO
from sim.planner.verify import fewest_passing, judged_run

ROLES = ("prefill", "decode")


def parse_pd_ratios(text: str, where: str = "--disagg") -> list[tuple[int, int]]:
    """`1:1,1:2,2:1` -> [(1, 1), (1, 2), (2, 1)] (repeats dropped); each side a positive integer."""
    ratios: list[tuple[int, int]] = []
    for item in text.split(","):
        p, sep, d = (part.strip() for part in item.partition(":"))
        if not sep or not p.isdigit() or not d.isdigit() or int(p) < 1 or int(d) < 1:
            raise InputError(where, item.strip() or None,
                             "use P:D pairs of positive integers, comma-separated (e.g. 1:1,1:2,2:1)")
        if (int(p), int(d)) not in ratios:
            ratios.append((int(p), int(d)))
    return ratios


@dataclass(frozen=True)
class SplitTask:
    """One P:D ratio on one replica config `cfg` (the aggregated candidate's): scale k from `first_k`,
    at most `max_runs` whole-workload runs."""

    cfg: EngineConfig
    n_prefill: int
    n_decode: int
    first_k: int
    max_runs: int
    prices: tuple[tuple[str, float], ...] = ()  # $ per GPU-hour by profile, overriding cost_per_hour_usd (--price)

    @property
    def label(self) -> str:
        return f"{self.n_prefill}P:{self.n_decode}D"


def split_cluster(cfg: EngineConfig, n_prefill: int, n_decode: int) -> EngineConfig:
    """`cfg` as a disaggregated cluster of n_prefill + n_decode replicas (groups keep cfg's own
    `prefill`/`decode` knobs, if any)."""
    return EngineConfig.model_validate({**cfg.model_dump(), "replicas": 1, "replica_hardware": None,
                                        "prefill_replicas": n_prefill, "decode_replicas": n_decode,
                                        "latency_attribution": False})


def split_gpus_and_cost(cfg: EngineConfig, n_prefill: int, n_decode: int,
                        prices: dict[str, float] | None = None) -> tuple[int, float]:
    """(GPUs, $/hour) of the layout: per group, replicas x its replica's GPUs (its own layout:
    tp, x dp under vLLM-style data parallelism), costed by `prices` (the plan's --price) or its
    hardware profile."""
    counts = {"prefill": n_prefill, "decode": n_decode}
    gpus, cost_per_hour_usd = 0, 0.0
    for role in ROLES:
        group = group_config(cfg, role)
        hourly = (prices or {}).get(group.hardware, load_hardware(group.hardware).cost_per_hour_usd)
        if hourly is None:
            raise InputError("--disagg", None, f"profile {group.hardware} ({role} group) has no cost_per_hour_usd")
        n_gpus = counts[role] * group_layout(cfg, role).n_gpus
        gpus += n_gpus
        cost_per_hour_usd += n_gpus * hourly
    return gpus, cost_per_hour_usd


def split_run(cfg: EngineConfig, trace: Trace, n_prefill: int, n_decode: int, k: int, target_qps: float,
              slo: PlanSLO, prices: dict[str, float] | None = None) -> dict:
    """One whole-workload run of k*P prefill + k*D decode replicas; the plan.json record of it (a
    failing run stops as soon as it is certain to fail: `stopped_early`, as for aggregated runs)."""
    gpus, cost = split_gpus_and_cost(cfg, k * n_prefill, k * n_decode, prices)
    return {"k": k, "prefill_replicas": k * n_prefill, "decode_replicas": k * n_decode, "gpus": gpus,
            "cost_per_hour_usd": cost,
            **judged_run(split_cluster(cfg, k * n_prefill, k * n_decode), trace, target_qps, slo, stop_failing=True)}


def verify_split(task: SplitTask, trace: Trace, target_qps: float, slo: PlanSLO) -> list[dict]:
    """Every run of the search for the smallest passing k (runs in a worker)."""
    return fewest_passing(lambda k: split_run(task.cfg, trace, task.n_prefill, task.n_decode, k, target_qps, slo,
                                              dict(task.prices)),
                          task.first_k, task.first_k, task.max_runs)


def first_k(aggregated_gpus: int, n_prefill: int, n_decode: int, prefill_gpus: int = 1, decode_gpus: int = 1) -> int:
    """Where the search starts: the k whose layout has about as many GPUs as the aggregated cluster
    (replicas of `prefill_gpus` / `decode_gpus` GPUs each)."""
    return max(1, math.ceil(aggregated_gpus / (n_prefill * prefill_gpus + n_decode * decode_gpus)))


def split_row(task: SplitTask, runs: list[dict]) -> dict:
    """The section's row of one ratio: the smallest passing run (or, if none passed, the largest tried)."""
    passing = [run for run in runs if run["passes"]]
    chosen = min(passing, key=lambda r: r["k"]) if passing else max(runs, key=lambda r: r["k"])
    return {"ratio": task.label, "prefill_per_unit": task.n_prefill, "decode_per_unit": task.n_decode,
            "verified": bool(passing), **{key: chosen[key] for key in (
                "k", "prefill_replicas", "decode_replicas", "gpus", "cost_per_hour_usd", "passes", "attainment",
                "within_all_slos", "p99_ms")}, "runs": runs}


def aggregated_row(recommended: dict) -> dict:
    run = recommended["verified_run"]
    return {"ratio": "aggregated", "replicas": recommended["replicas"], "gpus": recommended["gpus"],
            "cost_per_hour_usd": recommended["cost_per_hour_usd"], "verified": True, "passes": run["passes"],
            "attainment": run["attainment"], "within_all_slos": run["within_all_slos"], "p99_ms": run["p99_ms"]}


def compare_layouts(recommended: dict, cfg: EngineConfig, ratios: list[tuple[int, int]], trace: Trace,
                    target_qps: float, slo: PlanSLO, max_runs: int, run_tasks,
                    prices: dict[str, float] | None = None, model_id: str | None = None) -> dict:
    """plan.json's `disaggregated` section. `recommended`: the verified aggregated recommendation
    (with `verified_run`); `cfg`: its replica config; `run_tasks(fn, arg_tuples)` -> results in
    input order (the plan's backend)."""
    if cfg.policy not in ("continuous", "chunked", "radix"):
        return {"compared": False, "reason": f"disaggregated groups run continuous, chunked or radix, not {cfg.policy}"}
    groups = {role: group_config(cfg, role) for role in ROLES}
    gpus = {role: group_layout(cfg, role).n_gpus for role in ROLES}
    tasks = [SplitTask(cfg, p, d, first_k(recommended["gpus"], p, d, gpus["prefill"], gpus["decode"]), max_runs,
                       tuple(sorted((prices or {}).items()))) for p, d in ratios]
    all_runs = run_tasks(verify_split, [(task, trace, target_qps, slo) for task in tasks])
    aggregated = aggregated_row(recommended)
    splits = [split_row(task, runs) for task, runs in zip(tasks, all_runs, strict=True)]
    for row in splits:
        row["cost_vs_aggregated_usd"] = row["cost_per_hour_usd"] - aggregated["cost_per_hour_usd"]
    cheapest = min([aggregated, *[r for r in splits if r["verified"]]], key=_cost_key)  # ties: the first
    return {"compared": True, "hardware": cfg.hardware, "tp": cfg.tp, "prefill_tp": groups["prefill"].tp,
            "decode_tp": groups["decode"].tp, "prefill_layout": layout_label(groups["prefill"]),
            "decode_layout": layout_label(groups["decode"]), "policy": cfg.policy,
            "decode_router": cfg.decode_router, "max_runs_per_ratio": max_runs, "aggregated": aggregated,
            "splits": splits, "cheapest": cheapest["ratio"], "verdict": _verdict(aggregated, splits, cheapest),
            "launch": group_launch_lines(groups, model_id)}


def _cost_key(row: dict) -> float:
    """$/hour to a millionth of a dollar: layouts summing the same prices in another order cost the same."""
    return round(row["cost_per_hour_usd"], 6)


def _verdict(aggregated: dict, splits: list[dict], cheapest: dict) -> str:
    failed = [r["ratio"] for r in splits if not r["verified"]]
    tail = f"; {', '.join(failed)} met the SLOs at no k tried" if failed else ""
    if cheapest is aggregated:
        ties = [r["ratio"] for r in splits if r["verified"] and _cost_key(r) == _cost_key(aggregated)]
        tie = f"; {', '.join(ties)} cost the same" if ties else ""
        return f"aggregated is cheapest (${aggregated['cost_per_hour_usd']:.2f}/hour{tie}){tail}"
    saving = aggregated["cost_per_hour_usd"] - cheapest["cost_per_hour_usd"]
    return (f"{cheapest['ratio']} x{cheapest['k']} is cheapest: ${cheapest['cost_per_hour_usd']:.2f}/hour, "
            f"${saving:.2f}/hour less than aggregated{tail}")
