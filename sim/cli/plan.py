"""`infersim plan`: how many GPUs of which kind, TP and policy serve a target rate within the SLOs, at what cost."""

from __future__ import annotations

import os
import time
from pathlib import Path

import typer
from rich import box
from rich.table import Table

from sim.cli.common import console, print_json
from sim.config import load_config
from sim.errors import InputError
from sim.output import atomic_run_dir, write_json
from sim.planner.candidates import parse_list, parse_tps
from sim.planner.plan import SearchSettings, make_plan
from sim.planner.plots import write_plots
from sim.planner.slo import DEFAULT_GOODPUT_MIN, SLO_KEYS, parse_slo
from sim.run import DEFAULT_TRACE, resolve_seed
from sim.trace import ClosedLoop
from sim.workload import load_workload

PLAN_FILES = ("plan.json", "latency_vs_rate.png", "cost.png")  # what a plan folder may hold


def plan(
    workload: str = typer.Option(DEFAULT_TRACE, "--workload", "-w", help="trace file, spec YAML or bundled name"),
    workload_format: str = typer.Option(None, "--format", help="force a trace format (azure, mooncake, ...)"),
    model: str = typer.Option(None, "--model", "-m", help="bundled model name or YAML/config.json path"),
    slo: list[str] = typer.Option(None, "--slo", help=f"KEY=SECONDS, repeatable; keys: {', '.join(SLO_KEYS)}"),
    hardware: str = typer.Option("h100-sxm,a100-80g-sxm,h200", "--hardware", "-H", help="comma-separated profiles"),
    tp: str = typer.Option("1,2,4,8", "--tp", help="comma-separated tensor-parallel sizes"),
    policy: str = typer.Option("chunked,radix", "--policy", "-p", help="comma-separated scheduler policies"),
    target_qps: float = typer.Option(..., "--target-qps", help="the arrival rate the cluster must serve (req/s)"),
    goodput: float = typer.Option(DEFAULT_GOODPUT_MIN, "--goodput", help="least share of requests that must finish"),
    max_requests: int = typer.Option(1000, "--max-requests", help="search on the first N requests of the workload"),
    config: Path = typer.Option(None, "--config", "-c", help="base engine config YAML (block size, max_num_seqs...)"),
    seed: int = typer.Option(None, "--seed", show_default=False,
                             help="random seed [the config's, else the workload spec's, else 0]"),
    workers: int = typer.Option(min(2, os.cpu_count() or 1), "--workers", help="processes searching candidates"),
    top: int = typer.Option(10, "--top", help="candidates shown in the table"),
    out: Path = typer.Option(None, "--out", "-o", help="write plan.json and the plots here"),
    as_json: bool = typer.Option(False, "--json", help="print plan.json instead of the table"),
) -> None:
    """Size a cluster: per hardware x TP x policy, the highest rate one replica sustains within
    the SLOs, then replicas, GPUs and cost for the target rate; recommends the cheapest.

    Sustained rate: every SLO percentile, over the finished requests, is within its limit and >= --goodput finished.

    Judged on the first --max-requests requests re-timed to the rate; the first 10% warm up and are not judged.

    Search: double or halve, then bisect to 4.4% steps (assumes lower rates never do worse).

    Each candidate is a cluster of one hardware kind (simulate a mixed one with simulate --replica-hardware)."""
    wall_time_start_s = time.monotonic()  # reported only
    for flag, value in (("--workers", workers), ("--top", top)):
        if value < 1:
            raise InputError(flag, None, f"must be at least 1; got {value}")
    slo_spec = parse_slo(slo or [], goodput)
    base = resolve_seed(load_config(config, {"model": model, "seed": seed}), workload, workload_format)
    hardware_names, tps, policies = parse_list(hardware, "--hardware"), parse_tps(tp), parse_list(policy, "--policy")
    trace = load_workload(workload, workload_format, seed=base.seed)
    if isinstance(trace, ClosedLoop):
        raise InputError(workload, None, "a closed-loop spec has no arrival rate to plan for; give a trace")

    def search() -> dict:
        return make_plan(trace, base, hardware_names, tps, policies, slo_spec, target_qps,
                         SearchSettings(max_requests=max_requests), max(1, workers))

    if out is None:
        result = search()
    else:  # the folder is checked before searching and replaced whole after (sim.output.atomic_run_dir)
        with atomic_run_dir(out, PLAN_FILES) as tmp_dir:
            result = search()
            write_json(tmp_dir / "plan.json", result)
            write_plots(result, tmp_dir)
    if as_json:
        print_json(result)
        return
    print_plan(result, top)
    console.print(f"planned in {time.monotonic() - wall_time_start_s:.1f} s")
    if out is not None:
        console.print(f"wrote {out}/plan.json, latency_vs_rate.png and cost.png")


def print_plan(result: dict, top: int) -> None:
    """The cheapest `top` candidates, the recommendation, and what was left out and why."""
    limits = ", ".join(f"{k} <= {v:g} s" for k, v in result["slo"]["limits_s"].items())
    head = (f"{result['model']} on {Path(result['workload']).name} | target {result['target_qps']:g} req/s | {limits}, "
            f"goodput >= {result['slo']['goodput_min']:.0%}")
    rows = [[i + 1, r["hardware"], r["tp"], r["policy"], f"{r['max_qps_per_replica']:.3g}", r["replicas"], r["gpus"],
             f"{r['cost_per_hour_usd']:.2f}", f"{r['usd_per_m_output_tokens']:.3f}", r["binding_slo"]]
            for i, r in enumerate(result["candidates"][:top])]
    table = Table(title=head, box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1, 0, 0))
    columns = ("#", "hardware", "tp", "policy", "qps/rep", "reps", "GPUs", "$/hour", "$/M tok", "binds")
    for i, column in enumerate(columns):
        width = max([len(column)] + [len(str(row[i])) for row in rows])
        table.add_column(column, justify="left" if column in ("hardware", "policy", "binds") else "right",
                         min_width=width, no_wrap=True)
    for row in rows:
        table.add_row(*[str(cell) for cell in row])
    console.print(table)
    best = result["recommended"]
    console.print(f"[bold]recommended[/bold]: {best['replicas']} x {best['hardware']} tp{best['tp']} {best['policy']} "
                  f"= {best['gpus']} GPUs, ${best['cost_per_hour_usd']:.2f}/hour (cheapest that meets the SLOs; "
                  f"each replica sustains {best['max_qps_per_replica']:.3g} req/s; "
                  f"just above: {best['binding_detail']})")
    for row in result["infeasible"]:
        console.print(f"infeasible: {row['hardware']} tp{row['tp']} {row['policy']}: {row['reason']}")
    policies_of: dict[tuple, list[str]] = {}
    for row in result["skipped"]:
        policies_of.setdefault((row["hardware"], row["tp"], row["reason"]), []).append(row["policy"])
    for (hardware, tp, reason), policies in policies_of.items():
        console.print(f"skipped: {hardware} tp{tp} {','.join(policies)}: {reason}", style="dim", soft_wrap=True)
