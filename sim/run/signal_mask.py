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


class Terminated(KeyboardInterrupt):
    """SIGTERM (how schedulers stop jobs), raised where the program is, so that everything a
    Ctrl-C cleans up (partial folders, staged files) is cleaned up for it too."""


_RECEIVED: list[int] = []  # every SIGINT/SIGTERM the CLI's handlers saw in this process


def note_signal(signum: int) -> None:
    """Remember that `signum` arrived. Python runs a handler wherever the main thread is, and an
    exception raised inside a finalizer or callback is printed and dropped ("Exception ignored"):
    the program then carries on. What is noted here is checked again before anything is
    published and when the command ends, so a dropped interrupt still stops the command."""
    _RECEIVED.append(signum)


def forget_signals() -> None:
    _RECEIVED.clear()


def received_signal() -> int | None:
    """The first SIGINT/SIGTERM noted since `forget_signals`, or None."""
    return _RECEIVED[0] if _RECEIVED else None


def raise_if_interrupted() -> None:
    """Raise the interrupt again if one arrived and was dropped on the way (see `note_signal`)."""
    signum = received_signal()
    if signum == signal.SIGTERM:
        raise Terminated()
    if signum is not None:
        raise KeyboardInterrupt()
