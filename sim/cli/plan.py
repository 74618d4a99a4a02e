"""`infersim plan`: how many GPUs of which kind, TP and policy serve a target rate within the SLOs, at what cost."""

from __future__ import annotations

import os
import time
from pathlib import Path

import typer
from rich import box
from rich.table import Table

from sim.cli.common import StageProgress, console, print_json
from sim.errors import InputError
from sim.run import DEFAULT_TRACE
from sim.slo import DEFAULT_GOODPUT_MIN, SLO_KEYS

PLAN_FILES = ("plan.json", "latency_vs_rate.png", "cost.png", "pareto.png")  # what a plan folder may hold


def plan(
    workload: str = typer.Option(DEFAULT_TRACE, "--workload", "-w", help="trace file, spec YAML or bundled name"),
    workload_format: str = typer.Option(None, "--format", help="force a trace format (azure, mooncake, ...)"),
    model: str = typer.Option(None, "--model", "-m", help="bundled model name or YAML/config.json path"),
    slo: list[str] = typer.Option(None, "--slo", help=f"KEY=LIMIT (seconds, or 100ms), repeatable; keys: "
                                                     f"{', '.join(SLO_KEYS)}"),
    hardware: str = typer.Option("h100-sxm,a100-80g-sxm,h200", "--hardware", "-H", help="comma-separated profiles"),
    tp: str = typer.Option("1,2,4,8", "--tp", help="comma-separated tensor-parallel sizes"),
    policy: str = typer.Option("chunked,radix", "--policy", "-p", help="comma-separated scheduler policies"),
    search: list[str] = typer.Option(None, "--search", help="engine knob to search, KEY=v1,v2 (repeatable): "
                                                            "max_num_seqs, max_num_batched_tokens, block_size, ..."),
    target_qps: float = typer.Option(..., "--target-qps", help="the arrival rate the cluster must serve (req/s)"),
    goodput: float = typer.Option(DEFAULT_GOODPUT_MIN, "--goodput", help="least share of requests that must finish"),
    max_requests: int = typer.Option(1000, "--max-requests", help="size replicas on N requests of the workload"),
    sizing: str = typer.Option("busiest", "--sizing", help="busiest (its densest N requests) | head (its first N)"),
    verify: bool = typer.Option(True, "--verify/--no-verify", help="replay the whole workload through the cluster"),
    max_verify_runs: int = typer.Option(6, "--max-verify-runs", help="whole-workload runs per verified candidate"),
    disagg: str = typer.Option(None, "--disagg", show_default=False,
                               help="P:D ratios, e.g. 1:1,1:2,2:1: also verify the recommendation as disaggregated "
                                    "prefill/decode clusters (k*P + k*D replicas, smallest k that meets the SLOs; "
                                    "at most --max-verify-runs runs per ratio) and compare GPUs and cost"),
    config: Path = typer.Option(None, "--config", "-c", help="base engine config YAML (block size, max_num_seqs...)"),
    engine: str = typer.Option(None, "--engine", show_default=False,
                               help="engine preset (vllm | sglang | trtllm | lmdeploy | YAML): its knobs and CPU "
                                    "cost, and its launch command"),
    seed: int = typer.Option(None, "--seed", show_default=False,
                             help="random seed [the config's, else the workload spec's, else 0]"),
    backend: str = typer.Option("local", "--backend", help="local (processes) | ray"),
    address: str = typer.Option(None, "--address", help="ray: address of a running cluster"),
    workers: int = typer.Option(min(2, os.cpu_count() or 1), "--workers", help="parallel simulations"),
    top: int = typer.Option(10, "--top", help="candidates shown in the table"),
    out: Path = typer.Option(None, "--out", "-o", help="write plan.json and the plots here"),
    as_json: bool = typer.Option(False, "--json", help="print plan.json instead of the table"),
    uncertainty: int = typer.Option(None, "--uncertainty", show_default=False,
                                    help="N >= 2: rerun the recommended cluster under N perturbed cost models and "
                                         "report p10/p50/p90 of its capacity (plan.json recommended.uncertainty)"),
) -> None:
    """Size a cluster for the workload's real traffic, verify it on the whole workload, recommend the cheapest.

    Per hardware x TP x policy (x --search knobs): the highest rate one replica sustains on the workload's
    busiest stretch; replicas, GPUs and cost for the target rate; then the cheapest clusters replay the WHOLE
    workload at the target rate, adding (or removing) replicas until the SLOs hold.

    Sustained rate: every SLO percentile, over the finished requests, is within its limit and >= --goodput finished.

    Sizing: the densest --max-requests consecutive requests, re-timed as the whole workload would be at the rate
    (so its bursts keep their height); the first 10% warm up and are not judged.

    Search: double or halve, then bisect to 4.4% steps (assumes lower rates never do worse).

    Each candidate is a cluster of one hardware kind (simulate a mixed one with simulate --replica-hardware)."""
    from sim.budget import check_layouts
    from sim.config import load_config
    from sim.intervals import check_replays
    from sim.output import atomic_run_dir, write_json
    from sim.planner.band import capacity_band
    from sim.planner.candidates import parse_list, parse_tps
    from sim.planner.disagg import parse_pd_ratios
    from sim.planner.knobs import parse_knob_search
    from sim.planner.plan import SearchSettings, make_plan, run_on
    from sim.planner.plots import write_plots
    from sim.run import resolve_seed
    from sim.slo import parse_slo
    from sim.sweep.backends import make_backend
    from sim.trace import ClosedLoop
    from sim.workload import load_workload

    wall_time_start_s = time.monotonic()  # reported only
    for flag, value in (("--workers", workers), ("--top", top)):
        if value < 1:
            raise InputError(flag, None, f"must be at least 1; got {value}")
    slo_spec = parse_slo(slo or [], goodput)
    overrides = {"model": model, "seed": seed, "engine": engine}
    base = resolve_seed(load_config(config, overrides), workload, workload_format)
    hardware_names, tps, policies = parse_list(hardware, "--hardware"), parse_tps(tp), parse_list(policy, "--policy")
    knob_grid = parse_knob_search(search or [])
    pd_ratios = None if disagg is None else parse_pd_ratios(disagg)
    check_layouts(pd_ratios or [], "--disagg")  # sim.budget: replicas of every layout
    if pd_ratios and not verify:
        raise InputError("--disagg", None, "compares verified clusters; drop --no-verify")
    if uncertainty is not None:
        check_replays(uncertainty)
    if max_verify_runs < 1:
        raise InputError("--max-verify-runs", None, f"must be at least 1; got {max_verify_runs}")
    runner = make_backend(backend, max(1, workers) if workers is not None else None, address)
    trace = load_workload(workload, workload_format, seed=base.seed)
    if isinstance(trace, ClosedLoop):
        raise InputError(workload, None, "a closed-loop spec has no arrival rate to plan for; give a trace")
    if uncertainty is not None:
        check_replays(uncertainty, len(trace))  # sim.budget: draws x the requests each replays
    settings = SearchSettings(max_requests=max_requests, sizing=sizing, verify=verify, max_verify_runs=max_verify_runs)

    def run_search() -> dict:
        with StageProgress(enabled=not as_json) as progress:
            result = make_plan(trace, base, hardware_names, tps, policies, slo_spec, target_qps, settings,
                               backend=runner, knob_grid=knob_grid, progress=progress, pd_ratios=pd_ratios)
            if uncertainty is not None and result["recommended"] is not None:
                result["recommended"]["uncertainty"] = capacity_band(
                    result, base, trace, slo_spec, settings, uncertainty,
                    lambda fn, args: run_on(runner, fn, args, progress, "cost-model draws"))
            return result

    with runner:
        if out is None:
            result = run_search()
        else:  # the folder is checked before searching and replaced whole after (sim.output.atomic_run_dir)
            with atomic_run_dir(out, PLAN_FILES) as tmp_dir:
                result = run_search()
                write_json(tmp_dir / "plan.json", result)
                write_plots(result, tmp_dir)
    if as_json:
        print_json(result)
    else:
        print_plan(result, top)
        console.print(f"planned in {time.monotonic() - wall_time_start_s:.1f} s")
        if out is not None:
            console.print(f"wrote {out}/plan.json, latency_vs_rate.png, cost.png and pareto.png")
    if result["recommended"] is None:
        raise typer.Exit(code=1)


def print_plan(result: dict, top: int) -> None:
    """The cheapest `top` candidates, the verification, the recommendation and its launch command,
    the knob search's best settings and Pareto frontier, and what was left out and why."""
    limits = ", ".join(f"{k} <= {v * 1e3:g} ms" for k, v in result["slo"]["limits_s"].items())
    shape = result["workload_shape"]
    head = (f"{result['model']} on {Path(result['workload']).name} | target {result['target_qps']:g} req/s | {limits}, "
            f"goodput >= {result['slo']['goodput_min']:.0%} | peak/mean {shape['slice']['peak_to_mean']:.2f} "
            f"(sizing slice), {_fmt(shape['peak_to_mean_60s_at_target'])} (1-min windows at target)")
    with_knobs = any(r["knobs"] for r in result["candidates"])
    rows = [[i + 1, r["hardware"], r["tp"], r["policy"]] + ([_knobs(r["knobs"])] if with_knobs else []) +
            [f"{r['max_qps_per_replica']:.3g}", r["replicas"], r["gpus"], f"{r['cost_per_hour_usd']:.2f}",
             r["binding_slo"], _verified(r)] for i, r in enumerate(result["candidates"][:top])]
    columns = ("#", "hardware", "tp", "policy") + (("knobs",) if with_knobs else ()) + (
        "qps/rep", "reps", "GPUs", "$/hour", "binds", "verified")
    _print_rows(head, columns, rows, left=("hardware", "policy", "knobs", "binds", "verified"))
    best = result["recommended"]
    if best is None:
        console.print("[bold red]no recommendation[/bold red]: no verified cluster met the SLOs on the whole workload "
                      "(raise --max-verify-runs, relax the SLOs or add hardware)")
    else:
        run = best.get("verified_run")
        check = "" if run is None else (
            f"; whole workload at {result['target_qps']:g} req/s: " + ", ".join(
                f"P99 {k.upper()} {_fmt(v)} ms" for k, v in run["p99_ms"].items()) +
            f", {run['within_all_slos']:.1%} of requests within all SLOs")
        console.print(f"[bold]recommended[/bold]: {best['replicas']} x {best['hardware']} tp{best['tp']} "
                      f"{best['policy']}{_knobs(best['knobs'], ' ')} = {best['gpus']} GPUs, "
                      f"${best['cost_per_hour_usd']:.2f}/hour{check}")
        if "uncertainty" in best:
            from sim.planner.band import band_line

            console.print(band_line(best["uncertainty"]))
        launch = result["launch"]
        console.print(f"launch ({launch['label']}):\n  {launch['replicas']} x  {launch['command']}", soft_wrap=True)
    if result.get("disaggregated"):
        print_disaggregated(result["disaggregated"], result["slo"])
    if result.get("best_per_hardware_tp"):
        _print_rows("best engine knobs per hardware x TP", ("hardware", "tp", "policy", "knobs", "qps/rep"),
                    [[r["hardware"], r["tp"], r["policy"], _knobs(r["knobs"]), f"{r['max_qps_per_replica']:.3g}"]
                     for r in result["best_per_hardware_tp"]], left=("hardware", "policy", "knobs"))
    if result["pareto"]:
        _print_rows("Pareto frontier (passing points): output tok/s per GPU vs tok/s per user",
                    ("hardware", "tp", "policy", "knobs", "req/s/rep", "tok/s/GPU", "tok/s/user"),
                    [[p["hardware"], p["tp"], p["policy"], _knobs(p["knobs"]), f"{p['rate_qps_per_replica']:.3g}",
                      f"{p['tok_s_per_gpu']:.0f}", f"{p['tok_s_per_user']:.1f}"] for p in result["pareto"][:top]],
                    left=("hardware", "policy", "knobs"))
    for row in result["infeasible"]:
        console.print(f"infeasible: {row['hardware']} tp{row['tp']} {row['policy']}{_knobs(row['knobs'], ' ')}: "
                      f"{row['reason']}")
    policies_of: dict[tuple, list[str]] = {}
    for row in result["skipped"]:
        policies_of.setdefault((row["hardware"], row["tp"], row["reason"]), []).append(row["policy"])
    for (hardware, tp, reason), policies in policies_of.items():
        console.print(f"skipped: {hardware} tp{tp} {','.join(dict.fromkeys(policies))}: {reason}", style="dim",
                      soft_wrap=True)


def print_disaggregated(section: dict, slo: dict) -> None:
    """The recommendation next to its P:D layouts: replicas, GPUs, $/hour, attainment per SLO, P99s."""
    if not section["compared"]:
        console.print(f"disaggregated: not compared: {section['reason']}")
        return
    keys = list(section["aggregated"]["attainment"])
    rows = []
    for row in [section["aggregated"], *section["splits"]]:
        layout = (str(row["replicas"]) if row["ratio"] == "aggregated" else
                  f"{row['prefill_replicas']}P + {row['decode_replicas']}D (k={row['k']})")
        met = "yes" if row["verified"] else f"FAILS at k={row['k']}"
        rows.append([row["ratio"], layout, row["gpus"], f"{row['cost_per_hour_usd']:.2f}",
                     *[f"{row['attainment'][k]:.1%}" for k in keys], _fmt(row["p99_ms"]["ttft"]),
                     _fmt(row["p99_ms"]["tpot"]), f"{row['within_all_slos']:.1%}", met])
    title = (f"aggregated vs disaggregated: {section['hardware']} tp{section['tp']} {section['policy']}, "
             f"same SLOs, whole workload at the target rate")
    _print_rows(title, ("layout", "replicas", "GPUs", "$/hour", *keys, "P99 TTFT ms", "P99 TPOT ms", "within all",
                        "meets SLOs"), rows, left=("layout", "replicas", "meets SLOs"))
    console.print(f"[bold]disaggregated[/bold]: {section['verdict']}")


def _print_rows(title: str, columns: tuple, rows: list[list], left: tuple) -> None:
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1, 0, 0))
    for i, column in enumerate(columns):
        width = max([len(column)] + [len(str(row[i])) for row in rows])
        table.add_column(column, justify="left" if column in left else "right", min_width=width, no_wrap=True)
    for row in rows:
        table.add_row(*[str(cell) for cell in row])
    console.print(table)


def _knobs(knobs: dict, lead: str = "") -> str:
    return (lead + " ".join(f"{k}={v}" for k, v in knobs.items())) if knobs else ("" if lead else "-")


def _verified(row: dict) -> str:
    if "verified" not in row:
        return "not run (dearer)"
    if not row["verified"]:
        return f"FAILS at {row['verification'][-1]['replicas']} reps"
    if row["replicas"] == row["replicas_estimated"]:
        return "yes"
    return f"yes ({row['replicas_estimated']} -> {row['replicas']})"


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.3g}"
