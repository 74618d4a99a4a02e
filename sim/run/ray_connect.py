"""Connecting to Ray without its noise: an unreachable `--address` is one line, at once.

Ray's C++ core writes its own log lines (`rpc_client.h: Failed to connect to GCS ...`) straight
to file descriptor 2 and keeps retrying for minutes; Python's logging settings do not reach it.
So a `host:port` address is first tried with a plain TCP connection (a few seconds), then asked
for the HTTP/2 handshake every gRPC server answers (Ray's GCS, the process `ray start --head`
listens with, is a gRPC server): the client preface and an empty SETTINGS frame, to which an
HTTP/2 server replies with its own SETTINGS frame at once. A port held by anything else (a web
server, a database, a socket that never answers) is one line within `HANDSHAKE_TIMEOUT_S` instead
of minutes of Ray's retries. `ray.init` then runs with descriptor 2 pointed at a temporary file,
whose last line is kept for the error when the connection fails anyway.
"""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from sim.errors import InputError

CONNECT_TIMEOUT_S = 5.0
HANDSHAKE_TIMEOUT_S = 3.0
# RFC 9113 section 3.4: the client connection preface, then a SETTINGS frame (length 0, type 4,
# flags 0, stream 0); a server's first frame must be its SETTINGS frame
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
FRAME_HEADER_BYTES = 9
SETTINGS_FRAME = 4


def check_reachable(address: str) -> None:
    """InputError naming --address when `address` is `host:port` and nothing listens there, or what
    listens does not answer the gRPC (HTTP/2) handshake Ray's GCS answers. Other forms (`auto`,
    `local`, `ray://...`) are left to Ray."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address or not host:
        return
    hint = "start one with `ray start --head` (its GCS address) or leave --address out for a local one"
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S) as connection:
            first_frame = _handshake(connection)
    except OSError as exc:
        reason = exc.strerror or exc.__class__.__name__
        raise InputError("--address", None, f"cannot reach a Ray cluster at {address} ({reason}); {hint}") from None
    if first_frame is None:
        raise InputError("--address", None, f"{address} listens but is not a Ray cluster (no gRPC handshake within "
                                            f"{HANDSHAKE_TIMEOUT_S:g} s); {hint}")


def _handshake(connection: socket.socket) -> bytes | None:
    """The server's first HTTP/2 frame header when it answers the preface with SETTINGS, else None
    (it closed, sent something else, or said nothing within HANDSHAKE_TIMEOUT_S)."""
    connection.settimeout(HANDSHAKE_TIMEOUT_S)
    try:
        connection.sendall(HTTP2_PREFACE)
        received = b""
        while len(received) < FRAME_HEADER_BYTES:
            chunk = connection.recv(FRAME_HEADER_BYTES - len(received))
            if not chunk:
                return None
            received += chunk
    except (TimeoutError, ConnectionError):
        return None
    is_settings = received[3] == SETTINGS_FRAME and int.from_bytes(received[5:9], "big") & 0x7FFFFFFF == 0
    return received if is_settings else None


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
