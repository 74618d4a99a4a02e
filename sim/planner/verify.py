"""Verify a sized cluster: replay the WHOLE workload at the target rate through all its replicas
behind the router, judge every request against the SLOs, and add replicas until they hold.

The per-replica search runs on a slice; this run is what a deployment would see (every burst of the
workload, the router's imbalance, the cold start). A candidate passes when `sim.inputs.slo.slo_report`
says `met` over all requests.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from sim.inputs.config import EngineConfig
from sim.inputs.slo import slo_report
from sim.inputs.workload.trace import Trace
from sim.inputs.workload.transforms import extend, scale_rate
from sim.planner.early_stop import FailureWatch
from sim.planner.energy import run_energy
from sim.planner.slo import PlanSLO
from sim.run.percentile_bound import close_call_growth, percentile_upper_bound, stretches_for
from sim.run.simulate import simulate
from sim.run.steady_state import confirm_lifetimes, steady_state_of_run, within_budget
from sim.run.summary import requests_frame

P99_KEYS = ("ttft", "tpot", "e2e")
MAX_STEADY_REQUESTS = 200_000  # the longest a verification run may be extended to reach steady state


@dataclass(frozen=True)
class VerifyTask:
    """One candidate's verification. `replicas`: the estimate from the busiest slice; `first_guess`:
    where to start (e.g. the estimate scaled by the burst height, usually lower); at most `max_runs`;
    never fewer than `floor` replicas (so `floor` bounds the verified count from below)."""

    cfg: EngineConfig  # one replica of the candidate (replicas is set per run)
    replicas: int
    max_runs: int
    first_guess: int | None = None
    floor: int = 1


def verification_run(cfg: EngineConfig, trace: Trace, replicas: int, target_qps: float, slo: PlanSLO,
                     time_scale: dict[str, float] | None = None, stop_failing: bool = False) -> dict:
    """One whole-workload run on `replicas` replicas; the plan.json record of it. `time_scale`: a
    perturbed cost model (planner.band). `stop_failing`: see `judged_run`."""
    cluster = EngineConfig.model_validate({**cfg.model_dump(), "replicas": replicas, "latency_attribution": False})
    return {"replicas": replicas, "gpus": replicas * cluster.layout().n_gpus, "router": cfg.router,
            **judged_run(cluster, trace, target_qps, slo, time_scale, stop_failing)}


def judged_run(cluster: EngineConfig, trace: Trace, target_qps: float, slo: PlanSLO,
               time_scale: dict[str, float] | None = None, stop_failing: bool = False) -> dict:
    """The whole workload at `target_qps` through `cluster` (any layout, aggregated or disaggregated),
    every request judged by `sim.inputs.slo.slo_report`: passes, attainment per SLO, P99s, counts.
    `time_scale`: a perturbed cost model (planner.band). `stop_failing`: end the run as soon as it is
    certain to fail (sim.planner.early_stop); its record then judges the requests that had ended by
    then and says so in `stopped_early` (the verdict is the full run's; the P99s are of those requests).
    A run passes only where it reached steady state and its queue kept up (sim.run.steady_state): a
    workload too short to tell is drawn longer (or tiled: transforms.extend) to the length its own lifetimes
    call for and run again (its record
    is the longer run's, `steady_state.n_requests` says how long); past MAX_STEADY_REQUESTS it fails."""
    record = _judged_once(cluster, trace, target_qps, slo, time_scale, stop_failing)
    steady = record["steady_state"]
    while record["slo_passes"] and steady["kept_up"] and not steady["long_enough"] and steady["needed_requests"]:
        wanted = max(steady["needed_requests"], len(trace) + 1)
        if wanted > MAX_STEADY_REQUESTS:
            break
        trace = extend(trace, wanted)
        record = _judged_once(cluster, trace, target_qps, slo, time_scale, stop_failing)
        steady = record["steady_state"]
    wanted = close_call_length(record, slo, len(trace))
    if wanted is not None and wanted <= MAX_STEADY_REQUESTS:
        record = _judged_once(cluster, extend(trace, wanted), target_qps, slo, time_scale, stop_failing)
    return record


def close_call_length(record: dict, slo: PlanSLO, n_requests: int) -> int | None:
    """How many requests decide a close call (sim.run.percentile_bound.close_call_growth) on a steady
    run whose percentiles meet the SLOs; None: not a close call, or too long to decide (it fails)."""
    steady = record["steady_state"]
    if record["passes"] or not record["slo_passes"] or not (steady["long_enough"] and steady["kept_up"]):
        return None
    growth = close_call_growth([(record["slo"][s.key]["value_s"], record["upper_s"][s.key], s.limit_s)
                                for s in slo.limits])
    return None if growth is None else math.ceil(n_requests * growth)


def _judged_once(cluster: EngineConfig, trace: Trace, target_qps: float, slo: PlanSLO,
                 time_scale: dict[str, float] | None, stop_failing: bool) -> dict:
    watch = FailureWatch(slo) if stop_failing else None
    result = simulate(cluster, scale_rate(trace, target_qps=target_qps, where="--target-qps"), time_scale=time_scale,
                      stop_watch=watch)
    frame = requests_frame(result)
    energy = run_energy(result, frame)  # the whole run's, before an early stop's unfinished requests are dropped
    stopped = None
    if result.stopped_early_s is not None:
        frame = frame[frame["status"].isin(["FINISHED", "REJECTED"])]
        stopped = {"at_s": result.stopped_early_s, "n_judged": len(frame), "reason": watch.reason}
    report = slo_report(frame, slo, result.sim_duration_s)
    required = confirm_lifetimes(s.percentile for s in slo.limits)
    steady = steady_state_of_run(frame, required)
    if within_budget(required, steady) < required:
        steady = steady_state_of_run(frame, within_budget(required, steady))
    finished = frame[frame["status"] == "FINISHED"]
    stretches = stretches_for(steady.measured_lifetimes)
    upper_s = {s.key: percentile_upper_bound(finished[s.column].to_numpy(), s.percentile, stretches)
               for s in slo.limits}
    bounded = all(v is not None and v <= limit.limit_s for limit in slo.limits for v in [upper_s[limit.key]])
    p99_s = {}
    for metric in P99_KEYS:
        values = finished[f"{metric}_s"].dropna()
        p99_s[metric] = float(values.quantile(0.99)) if len(values) else None
    record = {
        "passes": report["met"] and bounded and stopped is None and steady.long_enough and steady.kept_up,
        "slo_passes": report["met"] and stopped is None, "stopped_early": stopped, "upper_s": upper_s,
        "steady_state": {**steady.to_dict(), "n_requests": len(frame), "verdict": steady.verdict()},
        "n_requests": result.table.n_requests, "n_finished": len(finished), "sim_duration_s": result.sim_duration_s,
        "p99_s": p99_s, "p99_ms": {k: None if v is None else v * 1e3 for k, v in p99_s.items()},
        "attainment": {key: v["attainment"] for key, v in report["per_slo"].items()},
        "within_all_slos": report["goodput"]["fraction"], "slo": report["per_slo"],
        "finished_share": report["finished_share"],
    }
    if energy is not None:  # only metered runs carry the key (sim/planner/energy.py)
        record["energy"] = energy
    return record


def verify_candidates(tasks: list[VerifyTask], trace: Trace, target_qps: float, slo: PlanSLO,
                      run_tasks: Callable[[Callable, list[tuple]], list]) -> tuple[list[list[dict]], list[int]]:
    """Each task's search for the fewest replicas that meet the SLOs (`fewest_passing` over
    `verification_run`s that stop once certain to fail; the answer: `verified_replicas(runs)`), its
    runs spread over `run_tasks(fn, arg_tuples)` (results in input order) in rounds: each round runs
    every unfinished search's next count and, speculatively, one replica fewer (the next probe when
    that count passes, as a first guess usually does), so a task's runs need not wait for each other.
    Only the runs each search asked for are kept, in its order: the records equal those of the search
    run alone, whoever ran them and however many at once. Returns (each task's records, how many of
    its runs were speculative and not needed)."""
    known: list[dict[int, dict]] = [{} for _ in tasks]
    while True:
        needed, speculative = [], []
        for i, task in enumerate(tasks):
            count = next_count(task, known[i])
            if count is None:
                continue
            needed.append((i, count))
            fewer = count - 1
            if fewer >= 1 and fewer not in known[i] and not any(c >= fewer and not r["passes"] for c, r in
                                                                 known[i].items()):
                speculative.append((i, fewer))
        if not needed:
            records = [searched_runs(task, known[i]) for i, task in enumerate(tasks)]
            return records, [len(known[i]) - len(runs) for i, runs in enumerate(records)]
        batch = needed + speculative  # the needed runs first: they are what the next round waits for
        args = [(tasks[i].cfg, trace, count, target_qps, slo, None, True) for i, count in batch]
        for (i, count), run in zip(batch, run_tasks(verification_run, args), strict=True):
            known[i][count] = run


class _NotRunYet(Exception):
    def __init__(self, count: int):
        super().__init__(count)
        self.count = count


def _replay(task: VerifyTask, known: dict[int, dict]) -> list[dict]:
    """`fewest_passing` over the runs known so far; _NotRunYet names the first count it lacks."""

    def run_at(count: int) -> dict:
        if count not in known:
            raise _NotRunYet(count)
        return known[count]

    return fewest_passing(run_at, task.replicas, task.first_guess, task.max_runs, task.floor)


def next_count(task: VerifyTask, known: dict[int, dict]) -> int | None:
    """The replica count the task's search needs next, given the runs known (None: it is done)."""
    try:
        _replay(task, known)
    except _NotRunYet as missing:
        return missing.count
    return None


def searched_runs(task: VerifyTask, known: dict[int, dict]) -> list[dict]:
    """The finished search's runs, in the order it asked for them."""
    return _replay(task, known)


def fewest_passing(run_at: Callable[[int], dict], estimate: int, first_guess: int | None,
                   max_runs: int, floor: int = 1) -> list[dict]:
    """Search the smallest count n >= 1 whose run `run_at(n)` passes (its record's "passes"), assuming
    larger counts never do worse: first at `first_guess` (default: the estimate); if it passes, one
    fewer at a time while that still passes; if it fails, the estimate (or one more), then one more at
    a time until one passes, then bisection between the largest failing and smallest passing count.
    At most `max_runs` runs, none below `floor`; returns every run's record in the order run."""
    runs: dict[int, dict] = {}

    def passes(count: int) -> bool:
        if count not in runs:
            runs[count] = run_at(count)
        return runs[count]["passes"]

    def budget_left() -> bool:
        return len(runs) < max_runs

    first = max(1, floor, min(first_guess or estimate, estimate))
    fail, ok = floor - 1, None  # largest failing (or below the floor) and smallest passing counts seen
    if passes(first):
        ok = first
        while ok - 1 > fail and budget_left():
            if not passes(ok - 1):
                fail = ok - 1
                break
            ok -= 1
        return list(runs.values())
    fail = first
    probe = estimate if estimate > first else first + 1
    while ok is None and budget_left():
        if passes(probe):
            ok = probe
        else:
            fail, probe = probe, probe + 1
    while ok is not None and ok - fail > 1 and budget_left():
        middle = (ok + fail) // 2
        if passes(middle):
            ok = middle
        else:
            fail = middle
    return list(runs.values())


def verified_replicas(runs: list[dict]) -> int | None:
    """The fewest replicas among the passing runs (None: none passed)."""
    passing = [run["replicas"] for run in runs if run["passes"]]
    return min(passing) if passing else None
