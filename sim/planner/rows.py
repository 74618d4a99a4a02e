"""Small pieces of a plan's search: running tasks on a backend in input order, the cluster-size bound,
the order plan.json's rows are ranked in, and the row recommended."""

from __future__ import annotations

from collections.abc import Callable

from sim.errors import InputError
from sim.inputs.budget import MAX_CLUSTER_REPLICAS

Progress = Callable[[str, int, int], None]  # (stage, done, total)


def run_on(backend, fn: Callable, arg_tuples: list[tuple], progress: Progress | None, stage: str) -> list:
    """fn(*args) for every tuple on `backend`, results in input order; progress after each one."""
    results: list = [None] * len(arg_tuples)
    for done, (index, result) in enumerate(backend.run_tasks(fn, arg_tuples), start=1):
        results[index] = result
        if progress is not None:
            progress(stage, done, len(arg_tuples))
    return results


def check_cluster_size(rows: list[dict], target_qps: float) -> None:
    """InputError naming --target-qps when a candidate needs more replicas than one simulated
    cluster holds (sim.inputs.budget.MAX_CLUSTER_REPLICAS): verifying it could not run."""
    largest = max(rows, key=lambda r: r["replicas"])
    if largest["replicas"] > MAX_CLUSTER_REPLICAS:
        raise InputError("--target-qps", None, f"{target_qps:g} req/s needs {largest['replicas']:,} replicas of "
                                               f"{largest['hardware']} tp{largest['tp']} "
                                               f"({largest['max_qps_per_replica']:.3g} req/s each), above the "
                                               f"{MAX_CLUSTER_REPLICAS:,} one simulated cluster holds: a lower rate")


def row_order(row: dict, engine_policy: str = "chunked") -> tuple:
    """Cheapest first; at equal cost the most headroom (highest rate per replica), then the engine's
    default policy (`engine_policy`: its launch line keeps the engine's defaults), then by name."""
    return (row["cost_per_hour_usd"], row["gpus"], -row["max_qps_per_replica"], row["hardware"], row["tp"],
            row["policy"] != engine_policy, row["policy"], str(row["knobs"]))


def recommend(rows: list[dict], verify: bool, target_qps: float,
              fits: Callable[[dict], bool] = lambda row: True) -> dict | None:
    """The cheapest verified row that `fits` (a power budget; any row, unverified, when verification
    is off), with its headroom: the rate its replicas sustain on the busiest slice over the target
    (an estimate), and how much of each SLO limit the verification run used (measured)."""
    chosen = next((r for r in rows if (r.get("verified") or not verify) and fits(r)), None)
    if chosen is None:
        return None
    capacity_qps = chosen["replicas"] * chosen["max_qps_per_replica"]
    headroom = {"estimated_capacity_qps": capacity_qps, "estimated_headroom": capacity_qps / target_qps - 1}
    if chosen.get("verification"):
        last = next(run for run in chosen["verification"] if run["replicas"] == chosen["replicas"])
        chosen = {**chosen, "verified_run": last}
        headroom["slo_use"] = {key: v["value_s"] / v["limit_s"] if v["value_s"] is not None else None
                               for key, v in last["slo"].items()}
    return {**chosen, "headroom": headroom}
