"""Where parallel tasks run (sweep points, replica splits, perturbed replays): local worker
processes or a Ray cluster. Both yield (index, result) as tasks finish.

A backend runs only what it is given and never writes: the caller stores each result as it arrives,
so a crash anywhere loses only the tasks still in flight."""

from __future__ import annotations

import itertools
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from sim.errors import InputError
from sim.run.ray_connect import check_reachable, quiet_stderr
from sim.run.signal_mask import signals_blocked

BACKENDS = ("local", "ray")
PARENT_CHECK_INTERVAL_S = 0.5


class PointInputError(InputError):
    """An InputError raised inside a worker, made to survive pickling back to the parent."""

    def __reduce__(self):
        return (PointInputError, (self.where, self.field, self.allowed))


def call_in_worker(fn: Callable, args: tuple, index: int = 0) -> tuple[int, Any]:
    """(index, fn(*args)), with an InputError made picklable for the trip back to the parent."""
    try:
        return index, fn(*args)
    except InputError as exc:
        raise PointInputError(exc.where, exc.field, exc.allowed) from None


def default_workers() -> int:
    return os.cpu_count() or 1


def make_backend(name: str, workers: int | None, address: str | None):
    if name not in BACKENDS:
        raise InputError("--backend", None, f"{name!r}; one of {', '.join(BACKENDS)}")
    if workers is not None and workers < 1:
        raise InputError("--workers", None, f"must be at least 1; got {workers}")
    if name == "local":
        if address is not None:
            raise InputError("--address", None, "only with --backend ray")
        return LocalBackend(workers or default_workers())
    if address is not None:
        check_reachable(address)  # before any work: one line within seconds, not minutes of Ray's retries
    return RayBackend(address, workers or default_workers())


class LocalBackend:
    """A pool of `workers` spawned processes, started at the first parallel call and kept for the
    next ones until `close()` (a plan calls it several times: searches, then verification rounds);
    each worker exits on its own if the sweep process dies. Use as a context manager."""

    def __init__(self, workers: int):
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> LocalBackend:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self, now: bool = False) -> None:
        """Stop the worker processes: wait for running tasks and drop queued ones; `now` (after an
        interrupt): terminate them first (SIGTERM: they leave silently)."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            if now:  # ProcessPoolExecutor has no public way to stop running tasks before Python 3.14
                for process in list((getattr(pool, "_processes", None) or {}).values()):
                    process.terminate()
            pool.shutdown(wait=True, cancel_futures=True)

    def run_tasks(self, fn: Callable, arg_tuples: Sequence[tuple]) -> Iterator[tuple[int, Any]]:
        """(index, fn(*arg_tuples[index])) as each task finishes; one task or one worker runs here,
        in-process. At most 2 x workers tasks are handed out at once, each read from `arg_tuples`
        only then (a lazy sequence keeps only those in memory). On any error (or when the caller
        stops early) the pool is closed."""
        if not arg_tuples:
            return
        if self.workers == 1 or len(arg_tuples) == 1:
            for index in range(len(arg_tuples)):
                yield call_in_worker(fn, arg_tuples[index], index)
            return
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=get_context("spawn"),
                                             initializer=_exit_with_parent, initargs=(os.getpid(),))
        queued = iter(range(len(arg_tuples)))
        pending: set = set()
        try:
            while True:
                for index in itertools.islice(queued, 2 * self.workers - len(pending)):
                    with _sigint_blocked():  # a worker spawned here starts with Ctrl-C blocked (below)
                        pending.add(self._pool.submit(call_in_worker, fn, arg_tuples[index], index))
                if not pending:
                    return
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    yield future.result()
        except BaseException as exc:
            self.close(now=isinstance(exc, KeyboardInterrupt))
            raise


def _sigint_blocked():
    """SIGINT held back in this thread for the block (delivered when it ends). The pool spawns its
    workers inside `submit`, and a spawned process inherits the signal mask: a Ctrl-C at any
    moment of a worker's start-up stays pending there, never a traceback; the parent handles it."""
    return signals_blocked({signal.SIGINT})


def _exit_with_parent(parent_pid: int) -> None:
    """Worker initializer: after a `kill -9` of the sweep, orphaned workers would otherwise block on
    their task queue forever. A daemon thread polls the parent id and exits the worker when it changes."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_CHECK_INTERVAL_S)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="exit-with-parent").start()
    # Ctrl-C reaches the whole process group: the parent prints the one line and stops the workers
    # (LocalBackend.close(now=True)); a worker's own KeyboardInterrupt traceback would break that line
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class RayBackend:
    """One Ray task per point, on the cluster at `address` or on a local cluster of `workers` CPUs
    started at the first call and stopped by `close()` (a context manager). An already initialized
    Ray session is used as it is (and left running)."""

    def __init__(self, address: str | None, workers: int):
        self.address = address
        self.workers = workers
        self._started_here: bool | None = None  # None: not connected yet

    def __enter__(self) -> RayBackend:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        """Stop the local Ray cluster if this backend started it (kept between calls until now)."""
        if self._started_here:
            _import_ray().shutdown()
        self._started_here = None

    def run_tasks(self, fn: Callable, arg_tuples: list[tuple]) -> Iterator[tuple[int, Any]]:
        """(index, fn(*arg_tuples[index])) as each Ray task finishes."""
        if not arg_tuples:
            return
        ray = _import_ray()
        if self._started_here is None or not ray.is_initialized():
            self._started_here = self._init(ray)
        pending = []
        try:
            task = ray.remote(num_cpus=1)(call_in_worker)
            pending = [task.remote(fn, args, index) for index, args in enumerate(arg_tuples)]
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                yield _get(ray, ready[0])
        except BaseException:
            for ref in pending:
                ray.cancel(ref, force=True)
            self.close()
            raise

    def _init(self, ray) -> bool:
        if ray.is_initialized():
            return False
        options = {"logging_level": logging.ERROR, "log_to_driver": False, "include_dashboard": False}
        if self.address is not None:
            check_reachable(self.address)
        try:
            with quiet_stderr():  # Ray's C++ core logs its retries to descriptor 2 (sim/run/ray_connect.py)
                if self.address is not None:
                    ray.init(address=self.address, **options)
                else:  # workers of a local cluster find `sim` where this process found it
                    paths = [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH")]
                    env_vars = {"PYTHONPATH": os.pathsep.join(p for p in paths if p)}
                    ray.init(num_cpus=self.workers, runtime_env={"env_vars": env_vars}, **options)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise InputError("--address", None, f"cannot start or reach Ray ({str(exc).splitlines()[0]})") from None
        return True


def _import_ray():
    try:
        import ray
    except ImportError:
        raise InputError("--backend", None, "ray is not installed; pip install 'infersim[cluster]'") from None
    return ray


def _get(ray, ref) -> dict:
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        if isinstance(exc.cause, InputError):
            raise exc.cause from None
        raise
