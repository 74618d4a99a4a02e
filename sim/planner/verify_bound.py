"""Which candidates the plan verifies, so that more options never give a dearer plan.

A candidate's verified cost V(c) is a function of that candidate alone (its slice answer, the whole
workload, the SLOs): `verify_candidates` returns the same records whoever else is verified with it.
Each verification searches no lower than a FLOOR (`verify_floor`, a share of where it starts), so
L(c) = cost of the floor is a true lower bound on V(c). The plan verifies candidates in order of L
and stops, per hardware, once the next L is no lower than that hardware's cheapest verified cost:
the recommendation is then the exact minimum of V over every candidate, and the cheapest verified
cluster of each hardware is exact too (the per-hardware table). Adding hardware, TP sizes or
`--search` values only adds candidates to a minimum, so it can never raise it, unless `max_verified`
stops the walk first, which the plan then reports (`verification_incomplete`).

Before any of that, candidates whose engine settings are identical (e.g. a knob the policy ignores,
`radix_ordering` under `chunked`) are collapsed into one, so duplicates cost nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from sim.planner.candidates import Candidate, Skipped
from sim.planner.verify import VerifyTask, verified_replicas, verify_candidates

FLOOR_SHARE = 0.75  # a verification never goes below 75% of (and always one below) where it starts


def collapse_identical(candidates: list[Candidate]) -> tuple[list[Candidate], list[Skipped]]:
    """The first of each set of candidates whose engine configs are equal; the rest skipped with why."""
    seen: dict[str, Candidate] = {}
    kept, skipped = [], []
    for c in candidates:
        key = c.cfg.model_dump_json()
        if key in seen:
            skipped.append(Skipped(c.cfg.hardware, c.cfg.tp, c.cfg.policy,
                                   f"{_knobs(c)} gives the same engine settings as {seen[key].label} "
                                   f"(collapsed into it)"))
        else:
            seen[key] = c
            kept.append(c)
    return kept, skipped


def _knobs(c: Candidate) -> str:
    return " ".join(f"{k}={v}" for k, v in c.knobs) or "the base settings"


def verify_floor(first_guess: int) -> int:
    """The fewest replicas a verification starting at `first_guess` may try."""
    return max(1, min(first_guess - 1, math.floor(first_guess * FLOOR_SHARE)))


def verify_by_bound(rows: list[dict], candidates: list[Candidate], first_guesses: list[int], max_verified: int,
                    batch_size: int, make_task: Callable[[int, int, int], VerifyTask], run_batch: Callable,
                    recost: Callable[[int, int], dict], admits: Callable[[dict], bool] | None = None) -> dict:
    """Verify rows (parallel to `candidates` and `first_guesses`) by lower bound, in rounds of
    `batch_size`, while some row's bound is below its hardware's cheapest verified cost and fewer
    than `max_verified` were verified (rows that could beat the overall best first). Mutates rows:
    `cost_lower_bound_usd` and `verify_floor_replicas` on all; `verified`, `verification`,
    `verification_runs_unused`, `replicas_estimated` on the verified ones, and (passing) the fields
    of `recost(i, replicas)`. Returns plan.json's `verification_order` section (what was verified,
    whether the minimum is exact). `admits`: a verified row sets its hardware's best only where it
    admits it (a power budget, sim.planner.energy), so the walk goes on to dearer rows that may fit."""
    floors = [verify_floor(g) for g in first_guesses]
    for row, c, floor in zip(rows, candidates, floors, strict=True):
        row["verify_floor_replicas"] = floor
        row["cost_lower_bound_usd"] = c.cost_per_hour_usd(floor)  # billed cost never falls with replicas
    pending = sorted(range(len(rows)), key=lambda i: (rows[i]["cost_lower_bound_usd"], i))
    best: dict[str, float] = {}
    n_verified = 0

    def open_rows() -> list[int]:
        """Unverified rows that could still beat their hardware's best, those that could beat the
        overall best first (the recommendation's exactness comes before the per-hardware table's)."""
        overall = min(best.values(), default=math.inf)
        bound = lambda i: rows[i]["cost_lower_bound_usd"]  # noqa: E731
        left = [i for i in pending if bound(i) < best.get(rows[i]["hardware"], math.inf)]
        return sorted(left, key=lambda i: (bound(i) >= overall, bound(i), i))

    while open_rows() and n_verified < max_verified:
        batch = open_rows()[:min(batch_size, max_verified - n_verified)]
        verified, unused = run_batch([make_task(i, floors[i], first_guesses[i]) for i in batch])
        for i, runs, n_unused in zip(batch, verified, unused, strict=True):
            row = rows[i]
            replicas = verified_replicas(runs)
            row.update({"verification_runs_unused": n_unused, "replicas_estimated": row["replicas"],
                        "verified": replicas is not None, "verification": runs})
            if replicas is not None:
                row.update(recost(i, replicas))
            if replicas is not None and (admits is None or admits(row)):
                best[row["hardware"]] = min(best.get(row["hardware"], math.inf), row["cost_per_hour_usd"])
        n_verified += len(batch)
        pending = [i for i in pending if i not in batch]
    left = open_rows()
    overall = min(best.values(), default=math.inf)
    return {"rule": "lower bound first, per hardware, until no unverified bound is below the cheapest verified cost",
            "floor_share": FLOOR_SHARE, "n_verified": n_verified, "max_verified": max_verified,
            "exact": not any(rows[i]["cost_lower_bound_usd"] < overall for i in left),
            "exact_per_hardware": not left, "n_left_with_lower_bound": len(left)}


def run_verifications(trace, target_qps: float, slo, run_tasks: Callable) -> Callable:
    """`run_batch` for verify_by_bound: the tasks' searches on the plan's backend."""
    return lambda tasks: verify_candidates(tasks, trace, target_qps, slo, run_tasks)


def mark_ties(rows: list[dict], recommended: dict | None) -> None:
    """`tie: true` on every other verified row that costs exactly what the recommendation costs."""
    if recommended is None:
        return
    for row in rows:
        same = (row["hardware"], row["tp"], row["policy"], row["knobs"]) == (
            recommended["hardware"], recommended["tp"], recommended["policy"], recommended["knobs"])
        if row.get("verified") and not same and math.isclose(row["cost_per_hour_usd"],
                                                             recommended["cost_per_hour_usd"]):
            row["tie"] = True


def verified_per_hardware(rows: list[dict]) -> list[dict]:
    """Per hardware, its cheapest verified row (rows in plan order): 'H100 or H200?' in one table."""
    best: dict[str, dict] = {}
    for row in rows:
        if row.get("verified") and row["hardware"] not in best:
            best[row["hardware"]] = row
    return [{k: r[k] for k in ("hardware", "tp", "policy", "knobs", "replicas", "gpus", "cost_per_hour_usd",
                               "usd_per_m_output_tokens")} for r in best.values()]
