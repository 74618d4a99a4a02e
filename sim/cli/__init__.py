"""The `infersim` command line (typer): one module per command group; errors become one line in
`sim.cli.errors` (every group is built by `sim.cli.common.new_app`).

Every command module is imported to build the CLI, so each keeps its module-level imports to what
its options need and imports its command's machinery (planner, sweeps, validation: pandas and
more) inside the command; `tests/test_requests_table.py` checks that starting the CLI loads no pandas."""

from __future__ import annotations

import typer

from sim.cli import calibrate_engine, disagg, engines, foundation, plan, simulate, sweep, validate
from sim.cli.calibrate import calibrate_app
from sim.cli.common import new_app
from sim.cli.day import day_app
from sim.cli.pool import pool_app
from sim.cli.slo_flags import EXTRA_ARGS
from sim.cli.workload import workload_app

app = new_app(name="infersim", help="Discrete-event simulator and capacity planner for LLM inference clusters.")


def _print_version(value: bool) -> None:
    if value:
        from sim import __version__

        typer.echo(f"infersim {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                       help="print the version and exit")) -> None:
    """Discrete-event simulator and capacity planner for LLM inference clusters."""


app.command()(foundation.profiles)
app.command()(foundation.models)
app.command()(foundation.memory)
app.command()(foundation.roofline)
app.command(context_settings=EXTRA_ARGS)(simulate.simulate)  # vLLM's --goodput ttft:2000 tpot:50 (slo_flags)
app.command(context_settings=EXTRA_ARGS)(plan.plan)
app.command(context_settings=EXTRA_ARGS)(sweep.sweep)
app.command()(engines.engines)
app.command()(validate.validate)
app.command()(disagg.disagg)
calibrate_app.command("engine")(calibrate_engine.engine)
app.add_typer(workload_app, name="workload", help="Describe and sample workloads.")
app.add_typer(calibrate_app, name="calibrate", help="Time kernels, fit the cost model, report residuals.")
app.add_typer(day_app, name="day", help="A day in production: autoscaling, cold starts, failures, $ per day.")
app.add_typer(pool_app, name="pool", help="Several models on one GPU pool: per-model plans, packed, with the total.")


def main() -> None:
    app()
