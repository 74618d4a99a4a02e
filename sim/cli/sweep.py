"""`infersim sweep`: a grid of configs over one workload, in parallel, resumable, with plots."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from sim.cli.common import LONG_RUN_STEPS, ProgressLines, console, print_table
from sim.cli.slo_flags import goodput_option, min_finished_option, resolve_slo, slo_line, slo_option
from sim.errors import InputError
from sim.inputs.budget import DEFAULT_MAX_SWEEP_POINTS, MAX_ROWS, check_search_space
from sim.run.invoke import DEFAULT_TRACE

if TYPE_CHECKING:
    from sim.sweep.runner import SweepOutcome

TABLE_METRICS = {"request_throughput": "req/s", "goodput_request_throughput": "good req/s",
                 "goodput_fraction": "in SLO", "ttft_s_p99": "P99 TTFT (ms)", "tpot_s_p99": "P99 TPOT (ms)",
                 "meets_slo": "meets SLOs"}
MS_METRICS = ("ttft_s_p99", "tpot_s_p99")
PERCENT_METRICS = ("goodput_fraction",)
MAX_TABLE_ROWS = 20


def sweep(
    ctx: typer.Context,
    grid: list[str] = typer.Option(None, "--grid", "-g", show_default=False,
                                   help="key=v1,v2,... (repeat for more keys): any config key, or qps (Poisson, as "
                                        "simulate --qps) / trace_qps (the trace's own shape at that mean) / "
                                        "rate_scale"),
    base: Path = typer.Option(None, "--base", "-b", show_default=False,
                              help="base config YAML: config keys plus trace, format, max_requests, qps, rate_scale"),
    trace: str = typer.Option(None, "--trace", "-t", show_default=False, help="trace, spec YAML or bundled name"),
    max_requests: int = typer.Option(None, "--max-requests", show_default=False, help="replay the first N requests"),
    backend: str = typer.Option("local", "--backend", help="local (process pool) | ray"),
    workers: int = typer.Option(None, "--workers", "-w", show_default=False,
                                help="parallel points [CPU count]; with ray: CPUs of the local cluster"),
    address: str = typer.Option(None, "--address", show_default=False, help="ray: address of a running cluster"),
    out: Path = typer.Option(Path("sweep_results"), "--out", "-o", help="results.parquet, parts/ and plots go here"),
    plots: bool = typer.Option(True, "--plots/--no-plots", help="write the standard PNG figures"),
    slo: list[str] = slo_option(),
    goodput_pairs: list[str] = goodput_option(),
    goodput_min: float = min_finished_option(),
    objective: str = typer.Option(None, "--objective", show_default=False,
                                  help="result column to sort by, best first [goodput_request_throughput with "
                                       "--slo, else request_throughput]"),
    max_points: int = typer.Option(DEFAULT_MAX_SWEEP_POINTS, "--max-points",
                                   help="refuse a grid of more points than this (each point is a simulation)"),
) -> None:
    """Run every combination of the --grid values over a base config, in parallel.

    Each finished point adds one row (parameters + summary metrics) to OUT/results.parquet.

    The same command again skips finished points: an interrupted sweep (even kill -9) loses only those in flight.
    """
    from sim.cli.outputs import claim
    from sim.inputs.workload.load import spec_seed
    from sim.run.backends import make_backend
    from sim.run.destination import FolderOut
    from sim.sweep.grid import expand, load_base, parse_grid
    from sim.sweep.slo import add_slo_columns, sort_best_first
    from sim.sweep.store import SWEEP_NAMES

    claim([FolderOut("--out", out, SWEEP_NAMES)])  # refused before any point runs; one writer at a time
    grid_values = parse_grid(grid or [])
    _check_grid_size(grid_values, max_points)
    engine_base, workload_base = load_base(base)
    slo_spec = resolve_slo(slo, goodput_pairs, ctx.args, goodput_min)
    if slo_spec is not None:
        engine_base["slo"] = slo_spec.per_request_limits_s()
    if trace is not None:
        workload_base["trace"] = trace
    if max_requests is not None:
        if not 1 <= max_requests <= MAX_ROWS:
            raise InputError("--max-requests", None, f"must be in [1, {MAX_ROWS:,}]; got {max_requests}")
        workload_base["max_requests"] = max_requests
    if "seed" not in engine_base and "seed" not in grid_values:  # no explicit seed: the spec's, else 0
        seed = spec_seed(workload_base.get("trace") or DEFAULT_TRACE, workload_base.get("format"))
        if seed is not None:
            engine_base["seed"] = seed
    points = expand(engine_base, workload_base, grid_values)
    if slo_spec is not None:
        console.print(slo_line(slo_spec))
    with make_backend(backend, workers, address) as runner:
        outcome = _run_with_progress(points, list(grid_values), out, runner)
    if slo_spec is not None:
        outcome.frame = add_slo_columns(outcome.frame, slo_spec)
    ranked = sort_best_first(outcome.frame, objective or ("goodput_request_throughput" if slo_spec else
                                                          "request_throughput"))
    _print_outcome(outcome, ranked, list(grid_values))
    _warn_overloaded(ranked, list(grid_values))
    if plots:
        from sim.sweep.plots import plot_sweep  # matplotlib only when drawing

        figures = plot_sweep(outcome.frame, grid_values, outcome.out_dir, slo_spec)
        if figures:
            console.print(f"plots: {', '.join(p.name for p in figures)}")


def _check_grid_size(grid_values: dict[str, list], max_points: int) -> None:
    """The grid's points, counted before one is built: above --max-points, one line and no work."""
    import math

    if max_points < 1:
        raise InputError("--max-points", None, f"must be at least 1; got {max_points}")
    made_of = " x ".join(f"{len(values):,} {key}" for key, values in grid_values.items()) + " values"
    check_search_space(math.prod(len(v) for v in grid_values.values()), made_of, "points", max_points, "--grid",
                       "--max-points")


def _run_with_progress(points, grid_keys: list[str], out: Path, runner) -> SweepOutcome:
    from sim.sweep.runner import run_sweep

    bar = Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TextColumn("points"),
                   TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(), console=console, transient=True,
                   disable=not console.is_terminal)
    task, counts = None, {"done": 0, "total": 0}
    lines = None if console.is_terminal else ProgressLines("sweep", min_total=LONG_RUN_STEPS)

    def on_start(n_to_run: int, n_skipped: int) -> None:
        nonlocal task
        if n_skipped:
            console.print(f"{n_skipped} of {n_to_run + n_skipped} points already finished in {out}; skipping them")
        task = bar.add_task("points", total=n_to_run)
        counts["total"] = n_to_run

    def on_point(row) -> None:
        bar.advance(task)
        counts["done"] += 1
        if lines is not None:  # pipes and logs: a line at each tenth of a long sweep, with the time left
            lines("points", counts["done"], counts["total"])

    try:
        with bar:
            return run_sweep(points, grid_keys, out, runner, on_start, on_point)
    except KeyboardInterrupt as interrupt:  # Ctrl-C (130) or SIGTERM (143)
        from sim.cli.errors import interrupt_exit_code

        typer.echo(f"interrupted: finished points are kept in {out}; run the same command to resume", err=True)
        raise typer.Exit(code=interrupt_exit_code(interrupt)) from None


def _print_outcome(outcome: SweepOutcome, frame, grid_keys: list[str]) -> None:
    """The table of this grid's points, best first."""
    columns = grid_keys + [m for m in TABLE_METRICS if m in frame.columns]
    rows = []
    for record in frame.head(MAX_TABLE_ROWS).to_dict("records"):
        rows.append([_cell(record[c], c) for c in columns])
    headers = grid_keys + [TABLE_METRICS[m] for m in TABLE_METRICS if m in frame.columns]
    title = (f"sweep: {outcome.n_points} points ({outcome.n_ran} run now, {outcome.n_skipped} from before), best first"
             + (f"; first {MAX_TABLE_ROWS} shown" if len(frame) > MAX_TABLE_ROWS else ""))
    print_table(title, headers, rows)
    console.print(f"wrote {outcome.out_dir / 'results.parquet'}")


def _warn_overloaded(frame, grid_keys: list[str]) -> None:
    """One line naming the points whose queue grew without bound (sim.run.load_check)."""
    column = "overload_overloaded"
    if column not in frame.columns:
        return
    bad = frame[frame[column].fillna(False).astype(bool)]
    if len(bad):
        worst = bad["overload_queue_growth_s_per_min"].max()
        names = ", ".join(" ".join(f"{k}={r[k]}" for k in grid_keys) for r in bad.head(5).to_dict("records"))
        console.print(f"warning: {len(bad)} of {len(frame)} points are overloaded (offered load exceeds capacity; "
                      f"the queue grew up to {worst:.3g} s per minute): {names}", style="bold yellow", soft_wrap=True)


def _cell(value, column: str) -> str:
    if value is None or isinstance(value, float) and value != value:
        return "-"
    if column in MS_METRICS:
        return f"{value * 1e3:.1f}"
    if column in PERCENT_METRICS:
        return f"{value:.1%}"
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)
