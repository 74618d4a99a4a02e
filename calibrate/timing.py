"""Timing one op: warm-up, repeats, median; rotating input copies so caches do not flatter.

On CUDA each call sits between two CUDA events (device time, not host time). On CPU a
monotonic host timer (`time.perf_counter`) brackets each call. Calls cycle through
several distinct input sets whose total size exceeds the last-level cache, so a repeat
does not find the previous repeat's weights already cached — the cost a serving engine
pays when the other layers' weights have passed through in between.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import torch

Inputs = TypeVar("Inputs")

# CPU last-level caches are smaller than this; used only to size rotation on CPU.
_CPU_CACHE_BYTES_ASSUMED = 64 * 2**20


@dataclass(frozen=True)
class Timing:
    """Median and spread of one op's repeated calls, in seconds."""

    time_s: float
    time_std_s: float
    n_repeats: int


def cache_bytes(device: str) -> int:
    """Bytes of the cache the rotation must overflow: the GPU's L2 on CUDA."""
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.device(device))
        return int(props.L2_cache_size)
    return _CPU_CACHE_BYTES_ASSUMED


def n_copies_to_rotate(
    bytes_per_copy: int, device: str, max_total_bytes: int, max_copies: int
) -> int:
    """How many distinct input copies to cycle through.

    Enough that the copies together are at least twice the cache (so each call finds its
    inputs evicted), at least 1, and never more than `max_total_bytes` or `max_copies`
    allow (a copy larger than the cache needs no company). When the cap wins, pair the
    rotation with `cache_flusher`.
    """
    if bytes_per_copy <= 0:
        raise ValueError("bytes_per_copy must be positive")
    wanted = math.ceil(2 * cache_bytes(device) / bytes_per_copy)
    affordable = max(1, max_total_bytes // bytes_per_copy)
    return max(1, min(wanted, affordable, max_copies))


def cache_flusher(device: str) -> Callable[[], None] | None:
    """On CUDA, a callable that overwrites a buffer twice the L2 size (evicting whatever
    the last call left there); run it between timed calls, outside the timed region, when
    the rotation alone is smaller than the cache. None on CPU."""
    if not device.startswith("cuda"):
        return None
    scratch = torch.empty(2 * cache_bytes(device), dtype=torch.uint8, device=device)
    return lambda: scratch.fill_(1)


def _synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _time_calls_cuda(run, input_sets, n_calls: int, offset: int, between) -> list[float]:
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_calls)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_calls)]
    for i in range(n_calls):
        inputs = input_sets[(offset + i) % len(input_sets)]
        if between is not None:
            between()
        starts[i].record()
        run(inputs)
        ends[i].record()
    torch.cuda.synchronize()
    return [start.elapsed_time(end) / 1000.0 for start, end in zip(starts, ends)]


def _time_calls_cpu(run, input_sets, n_calls: int, offset: int, between) -> list[float]:
    times_s = []
    for i in range(n_calls):
        inputs = input_sets[(offset + i) % len(input_sets)]
        if between is not None:
            between()
        started = time.perf_counter()
        run(inputs)
        times_s.append(time.perf_counter() - started)
    return times_s


def time_op(
    run: Callable[[Inputs], object],
    input_sets: Sequence[Inputs],
    device: str,
    n_warmup: int,
    n_repeats: int,
    between: Callable[[], object] | None = None,
) -> Timing:
    """Time `run(inputs)`, cycling through `input_sets`.

    Runs `n_warmup` untimed calls (compilation, autotuning, handle creation stay out),
    then `n_repeats` timed ones, each preceded by an untimed `between()` when given (e.g.
    a cache flush); returns their median and population standard deviation.
    """
    if not input_sets or n_repeats < 1 or n_warmup < 0:
        raise ValueError("need >= 1 input set, n_repeats >= 1 and n_warmup >= 0")
    for i in range(n_warmup):
        run(input_sets[i % len(input_sets)])
    _synchronize(device)
    timer = _time_calls_cuda if device.startswith("cuda") else _time_calls_cpu
    times_s = timer(run, input_sets, n_repeats, n_warmup, between)
    return Timing(
        time_s=statistics.median(times_s),
        time_std_s=statistics.pstdev(times_s),
        n_repeats=len(times_s),
    )
