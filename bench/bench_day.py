"""A day in production (sim/fleet, docs/day.md): prints the tables the day's note quotes.

  python bench/bench_day.py [--only diurnal,cold_start,failure,big] [--workers 2] [--out runs/bench_day]

- diurnal: 24 h, Llama-3.1-8B / H100 SXM, ShareGPT lengths, 16 -> 2.67 req/s (6x): a static fleet
  sized for the peak (one replica's capacity at the SLO measured first) vs target tracking vs
  predictive autoscaling: GPU-hours, $ per day, SLO attainment per hour; day_compare.png.
- cold_start: 40 min, 3 req/s stepping to 16 req/s at 20:00: per-minute attainment while replicas
  start, reactive vs predictive; cold_start.png.
- failure: 60 min at the peak rate (16 req/s), a replica fails at 20:00 (repair 1 h): N+0 vs N+1,
  retried or lost.
- big: a day of >= 10^7 requests (`--big-peak-rps`), peak RSS and wall time of one process; run
  alone (`--only big`), it takes long. With `--ray [--address A] [--workers N]`: the same day as
  one Ray task (a replay is sequential: one worker), and with `--segments K` also cut into K
  segments replayed at once (`sim.fleet.segments`, `--warmup-h` each: an approximation, printed
  beside the whole day's replay).
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sim.fleet.day import run_day  # noqa: E402
from sim.fleet.output import summarize  # noqa: E402
from sim.fleet.spec import DaySpec, load_day_spec  # noqa: E402
from sim.output import json_safe  # noqa: E402

DAY_SPEC = REPO / "workloads" / "days" / "diurnal_llama8b_h100.yaml"
BACKSTOP = {"kind": "target", "metric": "queue_length", "target": 8}  # predictive's reactive backstop
UTILISATION = 0.87  # of one replica's measured capacity: the rate per replica both autoscalers aim at


def reactive(capacity_rps: float) -> dict:
    """Target tracking on the measured arrival rate per replica (queue length would scale in to one
    replica whenever the queue is empty)."""
    return {"kind": "target", "metric": "request_rate", "target": round(UTILISATION * capacity_rps, 3)}


def predictive(capacity_rps: float) -> dict:
    return {"kind": "predictive", "rate_per_replica_rps": round(UTILISATION * capacity_rps, 3), "reactive": BACKSTOP}
FAILURE_DURATION_S, FAILURE_AT_S = 3600.0, 1200.0
PEAK_RPS, TROUGH_RPS = 16.0, 2.67  # the day spec's diurnal curve
STEP_FROM_RPS, STEP_TO_RPS = 3.0, 16.0


def with_changes(spec: DaySpec, workload: dict | None = None, rate: dict | None = None, fleet: dict | None = None,
                 **top) -> DaySpec:
    data = spec.model_dump()
    if workload:
        data["workload"].update(workload)
    if rate is not None:
        data["workload"]["tenants"][0]["rate"] = rate
    if fleet:
        for key, value in fleet.items():
            data["fleet"][key] = value
    data.update(top)
    return DaySpec.model_validate(data)


def _run(args: tuple[str, DaySpec]) -> tuple[str, dict, dict, float]:
    name, spec = args
    start_s = time.perf_counter()
    result = run_day(spec, DAY_SPEC.parent)
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    summary = summarize(result)
    summary["peak_rss_mib"] = peak_mib
    return name, summary, result.timeline, time.perf_counter() - start_s


def run_all(jobs: list[tuple[str, DaySpec]], workers: int, out: Path) -> dict[str, tuple[dict, dict, float]]:
    """Run the jobs `workers` at a time; each result is saved (out/results/NAME.json) as it ends,
    and jobs already saved there are not run again (`--report-only` reads them back)."""
    saved = out / "results"
    saved.mkdir(parents=True, exist_ok=True)
    todo = [job for job in jobs if not _result_path(saved, job[0]).is_file()]
    with ProcessPoolExecutor(max_workers=max(min(workers, len(todo)), 1)) as pool:
        for future in as_completed([pool.submit(_run, job) for job in todo]):
            name, summary, timeline, wall_s = future.result()
            _result_path(saved, name).write_text(json.dumps(json_safe([summary, timeline, wall_s])))
    return load_results(saved, [name for name, _ in jobs])


def _result_path(saved: Path, name: str) -> Path:
    return saved / (name.replace("|", "__").replace(" ", "_").replace("/", "_").replace("(", "").replace(")", "")
                    .replace(",", "") + ".json")


def load_results(saved: Path, names: list[str]) -> dict[str, tuple[dict, dict, float]]:
    return {name: tuple(json.loads(_result_path(saved, name).read_text())) for name in names
            if _result_path(saved, name).is_file()}


def autoscaler(policy: dict, **extra) -> dict:
    return {"policy": policy, "interval_s": 30, "cooldown_up_s": 60, "cooldown_down_s": 600, "min_replicas": 1,
            "max_replicas": 16, **extra}


def diurnal_jobs(spec: DaySpec, capacity_rps: float) -> list[tuple[str, DaySpec]]:
    peak_n = math.ceil(PEAK_RPS / capacity_rps)
    return [
        (f"static {peak_n} (peak)", with_changes(spec, fleet={"autoscaler": autoscaler(
            {"kind": "static", "replicas": peak_n}, min_replicas=peak_n, max_replicas=peak_n),
            "pricing": {"reserved_replicas": peak_n}})),
        ("target tracking", with_changes(spec, fleet={"autoscaler": autoscaler(reactive(capacity_rps)),
                                                      "pricing": {"reserved_replicas": 1}})),
        ("predictive", with_changes(spec, fleet={"autoscaler": autoscaler(predictive(capacity_rps)),
                                                 "pricing": {"reserved_replicas": 1}})),
    ]


def cold_start_jobs(spec: DaySpec, capacity_rps: float) -> list[tuple[str, DaySpec]]:
    rate = {"base": {"kind": "constant", "rate_rps": STEP_FROM_RPS},
            "steps": [{"at_s": 1200.0, "rate_rps": STEP_TO_RPS}]}
    jobs = []
    for name, policy in (("reactive", reactive(capacity_rps)), ("predictive", predictive(capacity_rps))):
        jobs.append((name, with_changes(spec, workload={"duration_s": 2400.0}, rate=rate, per_minute=True,
                                        fleet={"autoscaler": autoscaler(policy), "initial_replicas": 1})))
    return jobs


def failure_jobs(spec: DaySpec, capacity_rps: float) -> list[tuple[str, DaySpec]]:
    peak_n = math.ceil(PEAK_RPS / capacity_rps)
    rate = {"base": {"kind": "diurnal", "peak_rps": PEAK_RPS, "trough_rps": TROUGH_RPS, "peak_hour": 0.5}}
    jobs = []
    for headroom, on_failure in ((0, "retry"), (1, "retry"), (0, "lost")):
        n = peak_n + headroom
        jobs.append((f"N+{headroom} ({n}), {on_failure}", with_changes(
            spec, workload={"duration_s": FAILURE_DURATION_S}, rate=rate, per_minute=True,
            fleet={"autoscaler": autoscaler({"kind": "static", "replicas": n}, min_replicas=n, max_replicas=n),
                   "pricing": {"reserved_replicas": n},
                   "failures": {"schedule": [{"at_s": FAILURE_AT_S}], "on_failure": on_failure,
                                "repair_s": 3600.0}})))
    return jobs


def fmt(value, digits=4) -> str:
    return "-" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def print_table(title: str, header: list[str], rows: list[list]) -> None:
    print(f"\n{title}")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(fmt(cell) if not isinstance(cell, str) else cell for cell in row) + " |")


def report_diurnal(runs, out: Path) -> None:
    print_table("24 h diurnal day (16 -> 2.67 req/s), Llama-3.1-8B / H100 SXM, vLLM, SLO TTFT <= 2 s, TPOT <= 0.1 s",
                ["fleet", "requests", "GPU-hours", "$ per day", "reserved $", "on-demand $", "attainment",
                 "worst hour", "hours >= 99 %", "max replicas", "launched", "wall s", "peak RSS MiB"],
                [[name, s["n_arrived"], round(s["gpu_hours"], 1), round(s["dollars_per_day"]),
                  round(s["dollars"]["reserved"]), round(s["dollars"]["on_demand"]), s["slo_attainment"],
                  s["worst_hour_attainment"], f"{s['hours_meeting_target']}/{s['n_hours']}", s["replicas_ready_max"],
                  s["replicas_launched"], round(wall, 1), round(s["peak_rss_mib"])]
                 for name, (s, _, wall) in runs.items()])
    names = list(runs)
    rows = []
    for hour in range(len(runs[names[0]][0]["hours"])):
        cells = [hour]
        for name in names:
            row = runs[name][0]["hours"][hour]
            cells += [row["n_arrived"], row["slo_attainment"], fmt(row["replicas_ready_mean"], 2)]
        rows.append(cells)
    print_table("SLO attainment per hour", ["hour"] + [f"{n}: {col}" for n in names
                                                       for col in ("requests", "attained", "replicas")], rows)
    _plot(runs, out / "day_compare.png", "24 h diurnal: static for the peak vs autoscaled")


def report_cold_start(runs, out: Path) -> None:
    names = list(runs)
    rows = []
    for minute in range(16, 36):
        cells = [f"{minute}:00"]
        for name in names:
            row = runs[name][0]["minutes"][minute]
            cells += [row["n_arrived"], row["slo_attainment"]]
        rows.append(cells)
    print_table(f"cold start: {STEP_FROM_RPS:g} -> {STEP_TO_RPS:g} req/s at 20:00, per-minute SLO attainment",
                ["minute"] + [f"{n}: {col}" for n in names for col in ("requests", "attained")], rows)
    summary_rows = []
    for name, (s, timeline, _) in runs.items():
        after = [m for m in s["minutes"] if m["start_s"] >= 1200]
        missed = sum(m["n_arrived"] - m["n_good"] for m in after)
        low = [m["start_s"] / 60 for m in after if (m["slo_attainment"] or 0) < s["attainment_target"]]
        first_launch = next((t for t, st in zip(timeline["t_s"], timeline["starting"]) if st), None)
        summary_rows.append([name, s["cold_start_s"]["total_s"], first_launch, min(m["slo_attainment"] for m in after),
                             len(low), missed])
    print_table("cold start: the dip", ["policy", "cold start s", "first launch at s", "worst minute",
                                        "minutes below 99 %", "requests missing the SLO after the step"],
                summary_rows)
    _plot(runs, out / "cold_start.png",
          f"a step from {STEP_FROM_RPS:g} to {STEP_TO_RPS:g} req/s at 20:00: replicas start after a cold start")


def _window(minutes: list[dict], start_s: float, end_s: float):
    inside = [m for m in minutes if start_s <= m["start_s"] < end_s]
    arrived = sum(m["n_arrived"] for m in inside)
    return sum(m["n_good"] for m in inside) / arrived if arrived else None


def report_failure(runs) -> None:
    rows = []
    for name, (s, _, _) in runs.items():
        minutes = s["minutes"]
        rows.append([name, s["n_arrived"], s["n_retried"], s["n_lost"], s["slo_attainment"],
                     _window(minutes, 0, FAILURE_AT_S), _window(minutes, FAILURE_AT_S, FAILURE_AT_S + 600),
                     _window(minutes, FAILURE_AT_S + 600, FAILURE_DURATION_S), fmt(s["ttft_p99_s"], 2),
                     round(s["dollars_per_day"])])
    print_table(f"a replica fails at the peak ({FAILURE_AT_S / 60:g}:00 of a {FAILURE_DURATION_S / 60:g} min peak "
                f"at ~{PEAK_RPS:g} req/s; repair 1 h, so no replacement within the run)",
                ["fleet", "requests", "retried", "lost", "attainment", "before", "10 min after", "rest",
                 "TTFT p99 s", "$ per day"], rows)


def _plot(runs, path: Path, title: str) -> None:
    from sim.fleet.plots import plot_days

    plot_days({name: (s, timeline) for name, (s, timeline, _) in runs.items()}, path, None, title)
    print(f"\nwrote {path}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="diurnal,cold_start,failure")
    parser.add_argument("--workers", type=int, default=2, help="jobs at a time (each saved as it ends)")
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "bench_day")
    parser.add_argument("--big-peak-rps", type=float, default=200.0)
    parser.add_argument("--big-hours", type=float, default=24.0)
    parser.add_argument("--quick", action="store_true", help="a 30 min 'day' instead of 24 h (a smoke test)")
    parser.add_argument("--report-only", action="store_true", help="print the tables from the saved results")
    parser.add_argument("--capacity-rps", type=float, help="one replica's capacity (skip measuring it)")
    parser.add_argument("--ray", action="store_true", help="big: replay on Ray workers")
    parser.add_argument("--address", help="big --ray: a running Ray cluster (default: a local one)")
    parser.add_argument("--segments", type=int, default=1, help="big --ray: also K segments at once")
    parser.add_argument("--warmup-h", type=float, default=1.0, help="big --ray --segments: warm-up hours each")
    parser.add_argument("--segments-only", action="store_true", help="big --ray --segments: skip the one-task day")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    only = args.only.split(",")
    spec = load_day_spec(DAY_SPEC)
    if "big" in only:
        if args.ray:
            return big_day_on_ray(spec, args)
        return big_day(spec, args.big_peak_rps, args.big_hours)
    from sim.fleet.plan import replica_capacity_rps

    capacity_rps = args.capacity_rps or replica_capacity_rps(spec, DAY_SPEC.parent)[0]
    print(f"one replica's capacity at the SLO (300 s static probes, bisected): {capacity_rps:.3f} req/s")
    if args.quick:
        global FAILURE_DURATION_S, FAILURE_AT_S
        spec = with_changes(spec, workload={"duration_s": 1800.0})
        FAILURE_DURATION_S, FAILURE_AT_S = 900.0, 300.0
    jobs = {"diurnal": diurnal_jobs, "cold_start": cold_start_jobs, "failure": failure_jobs}
    all_jobs = [(f"{group}|{name}", job) for group in only for name, job in jobs[group](spec, capacity_rps)]
    if args.report_only:
        runs = load_results(args.out / "results", [name for name, _ in all_jobs])
    else:
        runs = run_all(all_jobs, args.workers, args.out)
    for group in only:
        group_runs = {key.split("|", 1)[1]: value for key, value in runs.items() if key.startswith(group + "|")}
        if len(group_runs) < sum(name.startswith(group + "|") for name, _ in all_jobs):
            print(f"\n{group}: {len(group_runs)} of its runs saved so far; not reported")
            continue
        {"diurnal": lambda r: report_diurnal(r, args.out), "cold_start": lambda r: report_cold_start(r, args.out),
         "failure": report_failure}[group](group_runs)


def big_spec(spec: DaySpec, peak_rps: float, hours: float) -> DaySpec:
    rate = {"base": {"kind": "diurnal", "peak_rps": peak_rps, "trough_rps": peak_rps / 6, "peak_hour": 14.0}}
    return with_changes(spec, workload={"duration_s": hours * 3600.0}, rate=rate,
                        fleet={"autoscaler": autoscaler(predictive(6.875), max_replicas=64)})


def big_day(spec: DaySpec, peak_rps: float, hours: float) -> None:
    """One process replays a day at peak_rps (trough peak/6); peak RSS from getrusage."""
    big = big_spec(spec, peak_rps, hours)
    name, s, _, wall_s = _run(("big", big))
    print_table(f"a big day: {hours:g} h, diurnal {peak_rps:g} -> {peak_rps / 6:g} req/s, one process",
                ["requests", "wall s", "requests/s simulated", "peak RSS MiB", "peak requests in flight",
                 "max replicas", "attainment"],
                [[s["n_arrived"], round(wall_s, 1), round(s["n_arrived"] / wall_s), round(s["peak_rss_mib"]),
                  s["peak_requests_in_flight"], s["replicas_ready_max"], s["slo_attainment"]]])


def big_day_on_ray(spec: DaySpec, args) -> None:
    """The big day as one Ray task, then (--segments K > 1) as K segment tasks at once; wall time
    seen by this driver, CPU seconds and peak RSS of each worker (getrusage there)."""
    from sim.fleet.replays import make_replays, replay, worker_stats
    from sim.fleet.segments import merge_segments, segment_tasks, segment_windows

    big = big_spec(spec, args.big_peak_rps, args.big_hours)
    windows = segment_windows(big, args.segments, args.warmup_h * 3600.0) if args.segments > 1 else None
    rows = []
    with make_replays(True, args.address, None) as replays:
        replays.map(worker_stats, [()])  # the cluster and a worker up before timing
        whole_day = [] if args.segments_only and windows else [(big, DAY_SPEC.parent)]
        for mode, tasks in (("whole day, 1 task", whole_day),
                            (f"{args.segments} segments at once", windows and segment_tasks(big, DAY_SPEC.parent,
                                                                                           windows))):
            if not tasks:
                continue
            start_s = time.perf_counter()
            results = replays.map(replay, tasks)
            wall_s = time.perf_counter() - start_s
            s = results[0]["summary"] if len(results) == 1 else merge_segments(big, windows, results)
            workers = [r["summary"]["worker"] for r in results]
            cpu_s = sum(w["cpu_s"] for w in workers)
            rows.append([mode, s["n_arrived"], f"{wall_s:.1f}", f"{cpu_s:.1f}", round(s["n_arrived"] / wall_s),
                         round(s["n_arrived"] / cpu_s), round(max(w["peak_rss_mib"] for w in workers)),
                         len({(w["host"], w["pid"]) for w in workers}), s["slo_attainment"],
                         f"{s['hours_meeting_target']}/{s['n_hours']}", f"{s['gpu_hours']:.1f}",
                         round(s["dollars_per_day"])])
            (args.out / f"big_ray_{len(results)}.json").write_text(json.dumps(json_safe(
                {"mode": mode, "wall_s": wall_s, "workers": workers, "summary": {k: v for k, v in s.items()
                                                                                 if k != "minutes"}})))
    print_table(f"a big day on Ray: {args.big_hours:g} h, diurnal {args.big_peak_rps:g} -> "
                f"{args.big_peak_rps / 6:g} req/s (segments: {args.warmup_h:g} h warm-up each)",
                ["replay", "requests", "wall s", "task CPU s", "requests/wall-s", "requests/CPU-s",
                 "worker peak RSS MiB", "workers", "attainment", "hours >= target", "GPU-hours", "$ per day"], rows)


if __name__ == "__main__":
    main()
