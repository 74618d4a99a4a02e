"""Shared CLI plumbing: app construction (with the one error handler), JSON output, rich tables."""

from __future__ import annotations

import sys
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from sim.cli.errors import OneLineErrors
from sim.output import json_text

console = Console() if Console().is_terminal else Console(width=140)  # pipes and logs: wide enough for the tables


def new_app(**settings: Any) -> typer.Typer:
    """A typer app (or sub-app) whose errors go through the one handler in `sim.cli.errors`."""
    settings.setdefault("no_args_is_help", True)
    return typer.Typer(cls=OneLineErrors, pretty_exceptions_enable=False, add_completion=False, **settings)


def print_json(data: Any) -> None:
    """Strict JSON on stdout (NaN/inf become null, as in every file we write)."""
    sys.stdout.write(json_text(data))


def print_table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    """A rich table; columns of empty names make a header-less key/value table."""
    table = Table(title=title or None, show_header=any(columns))
    for column in columns:
        table.add_column(column, justify="right" if column != columns[0] else "left")
    for row in rows:
        table.add_row(*[str(cell) for cell in row])
    console.print(table)


LONG_RUN_STEPS = 20  # plan and sweep stages of this many simulations or more report in pipes and logs


class ProgressLines:
    """`progress(stage, done, total)` as plain lines on stderr (`validate: cases: 12/40, 3.10 min, about
    6.20 min left`), one each time a stage passes another tenth of its total and at its end: visible
    in pipes and logs, where a bar is not, and bounded (about ten lines a stage). Stages of fewer than
    `min_total` steps stay quiet. The time left is the stage's pace so far; the wall clock it reads
    is shown only, it changes no result."""

    def __init__(self, command: str, enabled: bool = True, min_total: int = 1):
        import time

        self.command, self.enabled, self.min_total = command, enabled, min_total
        self.started_s = time.monotonic()  # display only
        self.stage_started_s: dict[str, float] = {}
        self.shown: dict[str, tuple[int, int]] = {}  # stage -> (last done, last tenth shown)

    def __call__(self, stage: str, done: int, total: int) -> None:
        import time

        from sim.run.human_units import duration_text

        now_s = time.monotonic()
        stage_start_s = self.stage_started_s.setdefault(stage, now_s)
        tenth = (done * 10) // max(total, 1)
        last_done, last_tenth = self.shown.get(stage, (0, -1))
        if done <= last_done:  # the stage began again (another batch of the same kind): count afresh
            last_tenth = -1
            self.stage_started_s[stage] = stage_start_s = now_s
        self.shown[stage] = (done, last_tenth)
        if not self.enabled or total < self.min_total or (done < total and tenth <= last_tenth):
            return
        self.shown[stage] = (done, tenth)
        elapsed = duration_text(now_s - self.started_s)
        left = "" if not 0 < done < total else (
            f", about {duration_text((now_s - stage_start_s) / done * (total - done))} left")
        typer.echo(f"{self.command}: {stage}: {done}/{total}, {elapsed}{left}", err=True)


class StageProgress:
    """A progress bar per stage (`progress(stage, done, total)`) with the time left, on a terminal;
    elsewhere (pipes, logs) `ProgressLines` for long stages. Use as a context manager; the instance
    is the callback (None when disabled, as with --json)."""

    def __init__(self, enabled: bool = True, command: str = "infersim"):
        self.enabled = enabled
        self.bar = None
        self.lines = None if console.is_terminal else ProgressLines(command, min_total=LONG_RUN_STEPS)
        self.tasks: dict[str, int] = {}

    def __enter__(self) -> StageProgress | None:
        if not self.enabled:
            return None
        if self.lines is not None:
            return self
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            TextColumn("eta"), TimeRemainingColumn(), console=console, transient=True)
        self.bar.start()
        return self

    def __call__(self, stage: str, done: int, total: int) -> None:
        if self.lines is not None:
            self.lines(stage, done, total)
            return
        if stage not in self.tasks:
            self.tasks[stage] = self.bar.add_task(stage, total=total)
        self.bar.update(self.tasks[stage], completed=done, total=total)

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()
