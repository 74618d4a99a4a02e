"""Connecting to Ray without its noise: an unreachable `--address` is one line, at once.

Ray's C++ core writes its own log lines (`rpc_client.h: Failed to connect to GCS ...`) straight
to file descriptor 2 and keeps retrying for minutes; Python's logging settings do not reach it.
So a `host:port` address is first tried with a plain TCP connection (a few seconds), and
`ray.init` runs with descriptor 2 pointed at a temporary file, whose last line is kept for the
error when the connection fails anyway.
"""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from sim.errors import InputError

CONNECT_TIMEOUT_S = 5.0


def check_reachable(address: str) -> None:
    """InputError naming --address when `address` is `host:port` and nothing listens there.
    Other forms (`auto`, `local`, `ray://...`) are left to Ray."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address or not host:
        return
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S):
            return
    except OSError as exc:
        reason = exc.strerror or exc.__class__.__name__
        raise InputError("--address", None, f"cannot reach a Ray cluster at {address} ({reason}); start one with "
                                            "`ray start --head` or leave --address out for a local one") from None


@contextmanager
def quiet_stderr() -> Iterator[list[str]]:
    """File descriptor 2 goes to a temporary file for the block; yields a list that receives
    the file's last non-empty line (for an error message) when the block ends."""
    last_line: list[str] = []
    try:
        saved = os.dup(2)
    except OSError:  # no descriptor 2 to redirect
        yield last_line
        return
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield last_line
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            lines = [line for line in sink.read().decode(errors="replace").splitlines() if line.strip()]
            last_line.extend(lines[-1:])
