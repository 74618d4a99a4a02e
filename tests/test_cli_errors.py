"""One error contract for every command: each registered command, whatever it raises that is bad
input (InputError, pydantic ValidationError, OSError, a usage error), prints ONE line and exits 2."""

from __future__ import annotations

import pytest
import typer
from pydantic import BaseModel, PositiveInt
from typer.testing import CliRunner

from sim.cli import app
from sim.errors import InputError


def _command_paths(group, prefix=()):
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            yield from _command_paths(command, (*prefix, name))
        else:
            yield (*prefix, name), command


ROOT = typer.main.get_command(app)
COMMANDS = sorted(_command_paths(ROOT))


class _Positive(BaseModel):
    n: PositiveInt


def _raise_input_error(**_):
    raise InputError("spec.yaml", "n_requests", "must be a positive integer")


def _raise_validation_error(**_):
    _Positive(n=-1)


def _raise_os_error(**_):
    raise PermissionError(13, "Permission denied", "/root/out")


def _raise_memory_error(**_):  # what numpy raises past the address-space limit (sim.inputs.budget refuses it earlier)
    raise MemoryError("Unable to allocate 72.8 TiB for an array with shape (10000000000000,) and data type float64")


RAISERS = {"input": _raise_input_error, "validation": _raise_validation_error, "os": _raise_os_error,
           "memory": _raise_memory_error}
EXPECTED = {
    "input": "spec.yaml: n_requests: must be", "validation": "error: n: Input should be greater than 0",
    "os": "/root/out: Permission denied", "memory": "error: out of memory (Unable to allocate 72.8 TiB);",
}


def test_every_command_is_registered():
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"simulate", "plan", "sweep", "memory", "roofline", "workload describe", "calibrate fit"} <= names


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=" ".join)
@pytest.mark.parametrize("kind", sorted(RAISERS))
def test_bad_input_from_any_command_is_one_line_exit_2(monkeypatch, path, kind):
    command = dict(COMMANDS)[path]
    monkeypatch.setattr(command, "callback", RAISERS[kind])
    # typer rebuilds the click command on each get_command; invoke the object we patched
    result = CliRunner().invoke(_Wrapped(ROOT), [*path, *_required_args(command)])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert EXPECTED[kind] in lines[0], result.output  # the command's own error, not a usage error
    assert "_Positive" not in lines[0]  # never the name of an internal model
    assert "Traceback" not in result.output


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=" ".join)
def test_unknown_flag_is_one_line_exit_2(path):
    result = CliRunner().invoke(app, [*path, "--no-such-flag"])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2
    assert len(lines) == 1 and "no-such-flag" in lines[0], result.output


def test_bare_group_prints_help_and_succeeds():
    result = CliRunner().invoke(app, ["workload"])
    assert result.exit_code == 0 and "describe" in result.output


def _required_args(command) -> list[str]:
    """Placeholder values for required arguments and options, so the call reaches the callback."""
    args: list[str] = []
    for param in command.params:
        if param.required:
            args += ["1"] if not param.opts[0].startswith("-") else [param.opts[0], "1"]  # "1" parses as any type
    return args


class _Wrapped:
    """Lets typer's CliRunner invoke an already built click command (the one we patched)."""

    def __init__(self, command):
        self.command = command


@pytest.fixture(autouse=True)
def _runner_accepts_built_commands(monkeypatch):
    import typer.testing

    original = typer.testing._get_command
    monkeypatch.setattr(typer.testing, "_get_command", lambda a: a.command if isinstance(a, _Wrapped) else original(a))


@pytest.mark.parametrize(("error", "expected"), [
    (PermissionError(13, "Permission denied", "/root/out"), "error: /root/out: Permission denied"),
    (OSError(28, "No space left on device"), "error: OSError: No space left on device"),
    (OSError(18, "Invalid cross-device link", "/a/run", None, "/b/run"), "error: /a/run -> /b/run: Invalid"),
    (IsADirectoryError(21, "Is a directory", "out/summary.json"), "error: out/summary.json: Is a directory"),
    (FileNotFoundError("no trace"), "error: FileNotFoundError: no trace"),
])
def test_os_errors_name_their_paths(monkeypatch, error, expected):
    command = dict(COMMANDS)[("simulate",)]

    def fail(**_):
        raise error

    monkeypatch.setattr(command, "callback", fail)
    result = CliRunner().invoke(_Wrapped(ROOT), ["simulate"])
    assert result.exit_code == 2 and result.stderr.strip().startswith(expected), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=" ".join)
def test_error_after_partial_output_is_still_one_line_on_stderr(monkeypatch, path):
    """A command that already printed part of its output and then hits bad input: stdout keeps
    what it printed, stderr gets exactly one line, exit 2, no traceback."""
    command = dict(COMMANDS)[path]

    def print_then_fail(**_):
        typer.echo("first row of a table")
        raise OSError(5, "Input/output error", "out/requests.parquet")

    monkeypatch.setattr(command, "callback", print_then_fail)
    result = CliRunner().invoke(_Wrapped(ROOT), [*path, *_required_args(command)])
    assert result.exit_code == 2, result.output
    assert result.stdout == "first row of a table\n"
    assert result.stderr == "error: out/requests.parquet: Input/output error\n"
