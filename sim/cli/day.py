"""`infersim day ...`: replay a day through an autoscaled fleet (`run`), or plan one (`plan`).

Machinery is imported inside each command (the CLI starts without it)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sim.cli.common import new_app, print_json, print_table

day_app = new_app(help="A day in production: diurnal traffic, autoscaling, cold starts, failures, $ per day.")

SpecArg = Annotated[Path, typer.Argument(help="a day spec YAML (docs/day.md; keys in workloads/SCHEMA.md)")]


def _hour_rows(summary: dict) -> list[list]:
    from sim.fleet.billing import fmt

    return [[row["hour"], row["n_arrived"], fmt(row["slo_attainment"]), fmt(row["ttft_p99_s"]),
             fmt(row["replicas_ready_mean"], 1), fmt(row["gpu_hours"], 2), fmt(row["dollars"], 2)]
            for row in summary["hours"]]


RayFlag = Annotated[bool, typer.Option("--ray", help="replay as Ray tasks (a local Ray cluster, or --address)")]
AddressOpt = Annotated[str | None, typer.Option("--address", help="a running Ray cluster (host:port); with --ray")]


def _worker_line(summary: dict) -> str:
    worker = summary["worker"]
    return f"replayed by pid {worker['pid']} on {worker['host']}: peak RSS {worker['peak_rss_mib']:.0f} MiB"


@day_app.command("run")
def run(spec: SpecArg,
        out: Annotated[Path, typer.Option("--out", help="run folder: summary.json, hours.csv, timeline.csv, "
                                                         "replicas.csv, day.png")],
        seed: Annotated[int | None, typer.Option(help="the workload's seed (overrides the spec's)")] = None,
        plot: Annotated[bool, typer.Option(help="write day.png")] = True,
        ray: RayFlag = False,
        address: AddressOpt = None,
        as_json: Annotated[bool, typer.Option("--json", help="print summary.json")] = False) -> None:
    """Replay the day: per hour, requests, SLO attainment, TTFT p99, replicas, GPU-hours and $."""
    from sim.cli.outputs import claim
    from sim.fleet.daygen import DayGenerator
    from sim.fleet.output import DAY_FILES, write_replay
    from sim.fleet.replays import make_replays, replay
    from sim.fleet.spec import load_day_spec
    from sim.run.destination import FolderOut

    claim([FolderOut("--out", out, DAY_FILES)])  # refused before any work, locked while the day runs
    day = load_day_spec(spec)
    if seed is not None:
        from sim.errors import InputError
        from sim.schema import MAX_SEED_EXCLUSIVE

        if not 0 <= seed < MAX_SEED_EXCLUSIVE:
            raise InputError("--seed", None, f"must be in [0, 2**63); got {seed}")
        day = day.model_copy(update={"workload": day.workload.model_copy(update={"seed": seed})})
    generator = DayGenerator(day.workload, spec.parent) if plot else None  # checks the traces before the replay
    with make_replays(ray, address, None) as replays:
        (result,) = replays.map(replay, [(day, spec.parent)])
    summary = write_replay(result, out, plot, generator)
    if as_json:
        print_json(summary)
        return
    print_table("hours", ["hour", "requests", "SLO attained", "TTFT p99 s", "replicas", "GPU-h", "$"],
                _hour_rows(summary))
    from sim.fleet.billing import fmt

    typer.echo(f"{summary['n_arrived']:,} requests, attainment {fmt(summary['slo_attainment'], 4)}, "
               f"{summary['hours_meeting_target']}/{summary['n_hours']} hours at the target, "
               f"{summary['gpu_hours']:.1f} GPU-hours, ${summary['dollars_per_day']:,.0f} per day; "
               f"cold start {summary['cold_start_s']['total_s']:.0f} s; {_worker_line(summary)}; wrote {out}")


@day_app.command("plan")
def plan(spec: SpecArg,
         out: Annotated[Path | None, typer.Option("--out", help="write plan.json and the verifying runs here")] = None,
         probe_s: Annotated[float, typer.Option(help="seconds of each one-replica capacity probe")] = 300.0,
         screen: Annotated[bool | None, typer.Option(
             "--screen/--no-screen", help="screen candidates on short windows of the day (peak, steepest rise) "
                                          "before replaying whole days; default: on for days of 6 h or more")] = None,
         ray: RayFlag = False,
         address: AddressOpt = None,
         workers: Annotated[int | None, typer.Option(help="CPUs of the local Ray cluster (default: all); "
                                                          "with --ray")] = None,
         as_json: Annotated[bool, typer.Option("--json", help="print plan.json")] = False) -> None:
    """Pick the reserved base, autoscaling parameters and headroom meeting the SLOs all day at least
    cost; verify by replaying the day, with and without a failure at the peak."""
    from sim.cli.outputs import claim
    from sim.errors import InputError
    from sim.fleet.plan import DAY_PLAN_FILES, FIRST_PROBE_RPS, MIN_PROBE_S, plan_day, write_plan
    from sim.fleet.replays import make_replays
    from sim.fleet.spec import load_day_spec
    from sim.run.destination import FolderOut

    claim([FolderOut("--out", out, DAY_PLAN_FILES)])  # refused before any work, locked while the day is planned

    if not (MIN_PROBE_S <= probe_s < 86_400):
        raise InputError("--probe-s", None, f"must be in [{MIN_PROBE_S:g}, 86400) seconds (the first probe runs at "
                                            f"{FIRST_PROBE_RPS:g} req/s: a shorter one sees no request); got {probe_s}")
    day = load_day_spec(spec)
    with make_replays(ray, address, workers) as replays:
        if not as_json:  # a plan of a long day takes minutes: each stage as it ends, on stderr
            replays.progress = lambda line: typer.echo(line, err=True)
        result = plan_day(day, spec.parent, probe_s, replays, screen)
    if out is not None:
        write_plan(result, out)
    if as_json:
        print_json(result.to_dict())
        return
    for line in result.lines():
        typer.echo(line)
