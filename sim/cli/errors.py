"""The ONE place where anything a user got wrong becomes one line on stderr and exit status 2.

Every `infersim` command group is built with `OneLineErrors` as its click class (see
`sim.cli.common.new_app`), so no command can forget it: `InputError`, pydantic validation errors,
`OSError` (with the path) and click/typer usage errors are all caught in `main`, which is the entry
point of the console script and of typer's test runner alike.
"""

from __future__ import annotations

import signal
import sys

import typer
from pydantic import ValidationError
from typer.core import TyperGroup

from sim.errors import InputError
from sim.run.signal_mask import Terminated, forget_signals, note_signal, received_signal

EXIT_BAD_INPUT = 2


def _raise_terminated(signum, frame) -> None:
    note_signal(signum)
    raise Terminated()


def _raise_interrupt(signum, frame) -> None:
    note_signal(signum)
    raise KeyboardInterrupt()


def interrupt_exit_code(exc: BaseException) -> int:
    """128 + the signal: 143 for SIGTERM, 130 for SIGINT (Ctrl-C)."""
    return 128 + (signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT)


def interrupted_line(exc: BaseException) -> str:
    """`interrupted; D left as it was` for the run folders the interrupt left untouched."""
    folders = getattr(exc, "out_dirs", None)
    if folders:
        return f"interrupted; {', '.join(str(f) for f in folders)} left as it was"
    return "interrupted; nothing written"


def printable(line: str) -> str:
    """`line` with control and other unprintable characters (escape sequences, newlines, bidi
    overrides in a file name) written as Python escapes, so the one line stays one plain line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in line)


def one_line(exc: BaseException) -> str | None:
    """The single line for a bad-input exception, or None when `exc` is not bad input."""
    if isinstance(exc, InputError):
        return exc.line()
    if isinstance(exc, ValidationError):  # our schemas are read through sim.yamlio; this is the fallback
        from sim.yamlio import describe_error

        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        return f"{field}: {describe_error(first)}" if field else describe_error(first)
    if isinstance(exc, OSError):
        return _os_error_line(exc)
    if isinstance(exc, MemoryError):  # the last resort: sim.inputs.budget refuses what it can foresee
        what = str(exc).split(" for an array")[0] or "a size asked for"
        return f"out of memory ({what}); ask for fewer requests, replicas, draws or tokens"
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


class _Interrupt(Exception):
    """Carries a KeyboardInterrupt past typer's own handler (which turns it into a bare exit 130)."""

    def __init__(self, interrupt: KeyboardInterrupt):
        super().__init__("interrupted")
        self.interrupt = interrupt


class OneLineErrors(TyperGroup):
    """A typer group whose `main` turns bad input into `error: <one line>` and exit status 2, and
    an interrupt (Ctrl-C, SIGTERM) into `error: interrupted; D left as it was` and 130 / 143."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as interrupt:
            raise _Interrupt(interrupt) from None

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        forget_signals()
        previous = _on_signal(signal.SIGTERM, _raise_terminated)
        previous_int = None  # SIGINT ignored at start (a background job) stays ignored
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            previous_int = _on_signal(signal.SIGINT, _raise_interrupt)
        try:
            code = super().main(args=args, prog_name=prog_name, complete_var=complete_var,
                                standalone_mode=False, **extra)
            late = received_signal()
            if late is not None and code != 128 + late:  # raised, then dropped on the way (a finalizer): stop
                typer.echo("error: interrupted", err=True)
                code = 128 + late
        except (_Interrupt, KeyboardInterrupt) as exc:
            interrupt = exc.interrupt if isinstance(exc, _Interrupt) else exc
            typer.echo(f"error: {printable(interrupted_line(interrupt))}", err=True)
            code = interrupt_exit_code(interrupt)
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
            typer.echo(f"error: {printable(line)}", err=True)
            code = EXIT_BAD_INPUT
        finally:
            _on_signal(signal.SIGTERM, previous)
            _on_signal(signal.SIGINT, previous_int)
        return _finish(code, standalone_mode)


def _on_signal(signum: int, handler):
    """Install `handler` for `signum` (main thread only); return the one it replaces."""
    if handler is None:
        return None
    try:
        return signal.signal(signum, handler)
    except ValueError:  # not the main thread (an embedding test runner): leave signals alone
        return None


def _finish(code, standalone_mode: bool) -> int:
    code = code if isinstance(code, int) else 0
    if standalone_mode:
        sys.exit(code)
    return code

