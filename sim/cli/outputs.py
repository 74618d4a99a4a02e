"""Every command's outputs claimed in one way (sim.run.destination), with the command's own inputs
found from its parameters, so no command can forget one: a parameter naming an existing path that
is not an output is an input (a trace, config, spec, measurement file)."""

from __future__ import annotations

import os
from collections.abc import Iterable


def claim(folders: Iterable = (), files: Iterable = ()) -> None:
    """Check and lock `folders` (sim.run.destination.FolderOut) and `files` (FileOut) now, before
    any work, for as long as the running command lasts (released when its click context closes,
    on success, error or interrupt alike)."""
    from sim.run.destination import claim_outputs

    folders, files = list(folders), list(files)
    ctx = _current_context()
    if ctx is None:  # called outside a command (a library caller): checked, not held
        with claim_outputs(folders, files):
            return
    output_flags = {out.flag for out in [*folders, *files]}
    ctx.with_resource(claim_outputs(folders, files, command_inputs(ctx, output_flags)))


def _current_context():
    """The running command's context (typer 0.2x carries its own copy of click)."""
    try:
        from typer._click.globals import get_current_context
    except ImportError:
        from click import get_current_context
    return get_current_context(silent=True)


def command_inputs(ctx, output_flags: set[str]) -> list[str]:
    """The values of the command's parameters (lists flattened) that are not the outputs' flags."""
    found: list[str] = []
    for param in ctx.command.params:
        if output_flags & set(param.opts):
            continue
        value = ctx.params.get(param.name)
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(item, (str, os.PathLike)):
                found.append(os.fspath(item))
    return found
