"""Day replays as tasks: one after another in this process, or as Ray tasks (`--ray`).

A replay task returns plain data (the summary, the autoscaler's timeline, the replicas' rows and
the worker process's peak RSS), so it travels back from a Ray worker as it is; the run folder is
written by the caller. The backends are the sweep's (`sim.run.backends`: a local Ray cluster
or one at `--address`, an unreachable address being one line, a worker's InputError coming back
as one). Replays are seeded by their spec alone: the same spec gives the same result wherever it
runs (only `wall_time_s` and the worker's figures differ).
"""

from __future__ import annotations

import os
import resource
import socket
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sim.errors import InputError

WORKER_KEYS = ("wall_time_s", "worker")  # what may differ between two replays of the same spec


def worker_stats() -> dict:
    """This process: its id, host and peak resident memory so far (a Ray worker runs several tasks
    in turn, so its peak covers every task it ran)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    peak_mib = peak / 2**20 if sys.platform == "darwin" else peak / 1024
    return {"pid": os.getpid(), "host": socket.gethostname(), "peak_rss_mib": round(peak_mib, 1)}


def replay(spec, base_dir: Path | None, offset_s: float = 0.0) -> dict:
    """Replay `spec` (a window of it from `offset_s`: `sim.fleet.day.run_day`): {summary (with
    `worker`: worker_stats() and the replay's CPU seconds), timeline, replicas}."""
    from sim.fleet.day import run_day
    from sim.fleet.output import replica_rows, summarize

    cpu_start_s = time.process_time()  # reported only
    result = run_day(spec, base_dir, offset_s=offset_s)
    summary = summarize(result)
    summary["worker"] = {**worker_stats(), "cpu_s": round(time.process_time() - cpu_start_s, 2)}
    return {"summary": summary, "timeline": result.timeline, "replicas": replica_rows(result)}


class Replays:
    """Runs replay tasks: `map(args)` -> results in the order given. `backend` is a
    `sim.run.backends` backend (None: one at a time in this process)."""

    def __init__(self, backend=None, progress: Callable[[str], None] | None = None):
        self.backend = backend
        self.progress = progress  # told of each map as it ends (what, how many, wall seconds)

    def map(self, fn: Callable, arg_tuples: Sequence[tuple], what: str = "") -> list[Any]:
        start_s = time.perf_counter()  # reported only
        if self.backend is None:
            out = [fn(*args) for args in arg_tuples]
        else:
            out = [None] * len(arg_tuples)
            for index, value in self.backend.run_tasks(fn, list(arg_tuples)):
                out[index] = value
        if self.progress is not None and what:
            self.progress(f"{what}: {len(arg_tuples)} replay(s), {time.perf_counter() - start_s:.0f} s")
        return out

    def close(self) -> None:
        if self.backend is not None:
            self.backend.close()

    def __enter__(self) -> Replays:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def make_replays(ray: bool, address: str | None, workers: int | None) -> Replays:
    """The backend for `--ray [--address A] [--workers N]`: checked here, before any work, so bad
    flags or an unreachable address are one line at once."""
    if workers is not None and workers < 1:
        raise InputError("--workers", None, f"must be at least 1; got {workers}")
    if not ray:
        if address is not None:
            raise InputError("--address", None, "only with --ray")
        if workers is not None and workers > 1:
            raise InputError("--workers", None, "only with --ray (without it the replays run here, one at a time)")
        return Replays(None)
    try:
        import ray as _ray  # noqa: F401
    except ImportError:
        raise InputError("--ray", None, "ray is not installed; pip install 'infersim[cluster]'") from None
    from sim.run.backends import RayBackend, default_workers
    from sim.run.ray_connect import check_reachable

    if address is not None:
        check_reachable(address)
    return Replays(RayBackend(address, workers or default_workers()))
