"""Holding signals back for a block of code (delivered when it ends), for the main thread."""

from __future__ import annotations

import signal
from collections.abc import Iterable, Iterator
from contextlib import contextmanager


@contextmanager
def signals_blocked(signals: Iterable[signal.Signals]) -> Iterator[None]:
    """`signals` arriving during the block stay pending and are delivered when it ends; a process
    spawned inside it inherits the mask. A no-op where the platform or thread cannot mask."""
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, set(signals))
    except (AttributeError, ValueError, OSError):
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
