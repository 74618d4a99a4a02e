"""The `infersim` command line (typer). Each command lives in a small cli_* module."""

from __future__ import annotations

import typer

from sim import cli_foundation, cli_plan, cli_simulate, cli_sweep
from sim.cli_calibrate import calibrate_app
from sim.cli_workload import workload_app

app = typer.Typer(
    name="infersim",
    help="Discrete-event simulator and capacity planner for LLM inference clusters.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.command()(cli_foundation.profiles)
app.command()(cli_foundation.models)
app.command()(cli_foundation.memory)
app.command()(cli_foundation.roofline)
app.command()(cli_simulate.simulate)
app.command()(cli_plan.plan)
app.command()(cli_sweep.sweep)
app.add_typer(workload_app, name="workload", help="Describe and sample workloads.")
app.add_typer(calibrate_app, name="calibrate", help="Time kernels, fit the cost model, report residuals.")


def main() -> None:
    app()
