"""Engine-knob search for the planner: `--search max_num_seqs=64,128,256 --search block_size=16,32`.

Every combination of the searched values becomes its own candidate (on top of hardware x TP x
policy), so each gets its own rate search; per hardware x TP the best setting is the one whose
replica sustains the highest rate (ties: the first in grid order). The Pareto frontier is taken
over every passing search point of every candidate: output throughput per GPU against per-user
speed (tok/s/user = 1 / mean TPOT); a point is on it when no other point is at least as good on both
and better on one.
"""

from __future__ import annotations

import itertools
import math

from sim.errors import InputError
from sim.inputs.budget import check_search_space
from sim.inputs.config import EngineConfig
from sim.sweep.grid import _parse_grid_option

SEARCHABLE = ("max_num_seqs", "max_num_batched_tokens", "block_size", "chunk_size", "preemption_mode",
              "radix_ordering", "gpu_memory_utilization", "kv_dtype")


def parse_knob_search(options: list[str]) -> dict[str, list]:
    """`["max_num_seqs=64,128"]` -> {"max_num_seqs": [64, 128]}; only keys of SEARCHABLE that the
    engine config has (policy, hardware and TP have their own flags)."""
    grid: dict[str, list] = {}
    allowed = [k for k in SEARCHABLE if k in EngineConfig.model_fields]
    for option in options or []:
        key = option.partition("=")[0].strip()
        if key not in allowed:
            raise InputError("--search", key or option, f"not a searchable engine knob; one of {', '.join(allowed)}")
        if key in grid:
            raise InputError("--search", key, "given twice; list all its values in one --search")
        grid[key] = _parse_grid_option(option, "--search")[1]
    return grid


def check_candidate_count(hardware: list[str], tps: list[int], policies: list[str], knob_grid: dict[str, list],
                          layouts, max_candidates: int) -> None:
    """The plan's search space counted before any candidate is built (each costs a rate search of
    several simulations): above `--max-candidates`, one line with the count and its factors."""
    if max_candidates < 1:
        raise InputError("--max-candidates", None, f"must be at least 1; got {max_candidates}")
    layouts_per_tp = [1 if layouts is None else len(layouts.variants(tp)) for tp in tps]
    factors = [f"{len(hardware):,} hardware", f"{len(tps):,} tp" if layouts is None else
               f"{sum(layouts_per_tp):,} tp x layouts", f"{len(policies):,} policies"]
    factors += [f"{len(values):,} {key}" for key, values in knob_grid.items()]
    count = len(hardware) * sum(layouts_per_tp) * len(policies) * math.prod(len(v) for v in knob_grid.values())
    check_search_space(count, " x ".join(factors), "candidates", max_candidates, "--search", "--max-candidates")


def knob_settings(grid: dict[str, list]) -> list[dict]:
    """The cartesian product of the grid, last key fastest; [{}] for an empty grid."""
    return [dict(zip(grid, combo, strict=True)) for combo in itertools.product(*grid.values())]


def best_per_hardware_tp(rows: list[dict]) -> list[dict]:
    """Per (hardware, tp), the feasible row with the highest max_qps_per_replica (ties: first seen)."""
    best: dict[tuple, dict] = {}
    for row in rows:
        key = (row["hardware"], row["tp"])
        if key not in best or row["max_qps_per_replica"] > best[key]["max_qps_per_replica"]:
            best[key] = row
    return [{"hardware": r["hardware"], "tp": r["tp"], "policy": r["policy"], "knobs": r["knobs"],
             "max_qps_per_replica": r["max_qps_per_replica"]} for r in best.values()]


PROBE_BELOW_SHARE = 1 / 8  # search points below 1/8 of a row's sustained rate are the bracket's probes


def operating_points(rows: list[dict]) -> list[dict]:
    """Every passing search point of every feasible row at or above PROBE_BELOW_SHARE of its
    sustained rate (lower ones are the search's probes, near 0 tok/s: not ways to run it), as
    (candidate, rate, tok/s/GPU, output tokens per dollar, tok/s/user)."""
    points = []
    for row in rows:
        usd_per_gpu_hour = row["cost_per_hour_usd"] / row["gpus"]
        gpus = row.get("gpus_per_replica", row["tp"])
        floor_qps = row["max_qps_per_replica"] * PROBE_BELOW_SHARE
        for p in row["search_points"]:
            if p["passes"] and p.get("tok_s_per_user") and p["rate_qps"] >= floor_qps:
                points.append({"hardware": row["hardware"], "tp": row["tp"], "policy": row["policy"],
                               "knobs": row["knobs"], "rate_qps_per_replica": p["rate_qps"],
                               "tok_s_per_gpu": p["output_tok_s"] / gpus,
                               "tok_per_usd": p["output_tok_s"] * 3600 / (gpus * usd_per_gpu_hour),
                               "tok_s_per_user": p["tok_s_per_user"],
                               **_tok_per_joule(p, gpus)})
    return points


def _tok_per_joule(point: dict, gpus: int) -> dict:
    """Output tokens per joule of a metered search point (its replica's GPUs at their mean watts,
    sim/planner/energy.py); {} for an unmetered one, so older plans' keys are kept."""
    energy = point.get("energy")
    if not energy or not energy["mean_power_w_per_gpu"]:
        return {}
    return {"tok_per_joule": point["output_tok_s"] / (energy["mean_power_w_per_gpu"] * gpus)}


def pareto_frontier(points: list[dict], axis: str = "tok_s_per_gpu") -> list[dict]:
    """The points no other point dominates on (`axis`, tok_s_per_user), by `axis` descending;
    `axis`: tok_s_per_gpu (throughput per GPU), tok_per_usd (output tokens per dollar) or tok_per_joule
    (output tokens per joule of GPU energy; metered points only)."""
    ordered = sorted(points, key=lambda p: (-p[axis], -p["tok_s_per_user"]))
    frontier, best_user = [], -1.0
    for p in ordered:
        if p["tok_s_per_user"] > best_user:
            frontier.append(p)
            best_user = p["tok_s_per_user"]
    return frontier
