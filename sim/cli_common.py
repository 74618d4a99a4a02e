"""Shared CLI plumbing: one-line errors with exit status 2, JSON output, rich tables."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from sim.errors import InputError

console = Console()


def input_errors_exit_2(command: Callable) -> Callable:
    """Decorate a typer command: an InputError prints `error: <line>` on stderr and exits 2."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except InputError as exc:
            typer.echo(f"error: {exc.line()}", err=True)
            raise typer.Exit(code=2) from None

    return wrapper


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=_json_default) + "\n")


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def print_table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    """A rich table; columns of empty names make a header-less key/value table."""
    table = Table(title=title or None, show_header=any(columns))
    for column in columns:
        table.add_column(column, justify="right" if column != columns[0] else "left")
    for row in rows:
        table.add_row(*[str(cell) for cell in row])
    console.print(table)
