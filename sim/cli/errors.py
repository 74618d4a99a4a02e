"""The ONE place where anything a user got wrong becomes one line on stderr and exit status 2.

Every `infersim` command group is built with `OneLineErrors` as its click class (see
`sim.cli.common.new_app`), so no command can forget it: `InputError`, pydantic validation errors,
`OSError` (with the path) and click/typer usage errors are all caught in `main`, which is the entry
point of the console script and of typer's test runner alike.
"""

from __future__ import annotations

import sys

import typer
from pydantic import ValidationError
from typer.core import TyperGroup

from sim.errors import InputError

EXIT_BAD_INPUT = 2


def one_line(exc: BaseException) -> str | None:
    """The single line for a bad-input exception, or None when `exc` is not bad input."""
    if isinstance(exc, InputError):
        return exc.line()
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        return f"{exc.title}: {field}: {first['msg']}" if field else f"{exc.title}: {first['msg']}"
    if isinstance(exc, OSError):
        return _os_error_line(exc)
    if hasattr(exc, "format_message"):  # click's (typer's vendored click's) usage and parameter errors
        ctx = getattr(exc, "ctx", None)
        return f"{ctx.command_path}: {exc.format_message()}" if ctx is not None else exc.format_message()
    return None


def _os_error_line(exc: OSError) -> str:
    """`path: what went wrong` (both paths of a failed rename or copy); the text of an OSError
    that has no path; its class name as the last resort."""
    paths = [str(p) for p in (exc.filename, exc.filename2) if p is not None]
    what = exc.strerror or str(exc) or exc.__class__.__name__
    return f"{' -> '.join(paths)}: {what}" if paths else f"{exc.__class__.__name__}: {what}"


class OneLineErrors(TyperGroup):
    """A typer group whose `main` turns bad input into `error: <one line>` and exit status 2."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        try:
            code = super().main(args=args, prog_name=prog_name, complete_var=complete_var,
                                standalone_mode=False, **extra)
        except typer.Abort:
            typer.echo("aborted", err=True)
            code = 1
        except Exception as exc:  # anything that is not bad input is re-raised below
            if type(exc).__name__ == "NoArgsIsHelpError":  # a bare group: its help, not an error
                typer.echo(exc.ctx.get_help())
                return _finish(0, standalone_mode)
            line = one_line(exc)
            if line is None:
                raise
            typer.echo(f"error: {line}", err=True)
            code = EXIT_BAD_INPUT
        return _finish(code, standalone_mode)


def _finish(code, standalone_mode: bool) -> int:
    code = code if isinstance(code, int) else 0
    if standalone_mode:
        sys.exit(code)
    return code

