"""Timing one op: warm-up, repeats, median; rotating input copies so caches do not flatter.

Two ways, both recorded (calibrate/runner.py):
- eager (`time_op`): on CUDA each call sits between two CUDA events, so the time includes the
  gaps the host leaves between launches when the op is small (what an engine pays where it
  runs eagerly); on CPU a monotonic host timer (`time.perf_counter`) brackets each call.
- CUDA-graph replay (`time_graph`, CUDA only): `n_launches` calls captured into one graph,
  each on the next input copy, the graph replayed `n_replays` times between CUDA events;
  time per call = replay time / n_launches. This is how engines run decode (vLLM, SGLang and
  TensorRT-LLM capture the decode step), so it is the kernel time the cost model is fitted on.

Calls cycle through several distinct input sets whose total size exceeds the last-level
cache, so a repeat does not find the previous repeat's weights already cached — the cost a
serving engine pays when the other layers' weights have passed through in between. Eager
calls also flush L2 between calls when the copies alone are too few; a graph cannot (the
flush would be timed with it), so `graph_l2_state` says whether its launches were rotated
past the L2 or may have found their inputs there ("warm").
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


@dataclass(frozen=True)
class GraphTiming:
    """Per-call time from CUDA-graph replays: median and spread over replays, in seconds."""

    time_s: float
    time_std_s: float
    n_replays: int
    n_launches: int  # calls captured in one replay


def graph_unavailable_reason(device: str) -> str | None:
    """Why CUDA-graph replay cannot be timed on `device`, or None when it can."""
    if not device.startswith("cuda"):
        return f"CUDA-graph replay needs a CUDA device (device is {device}): eager times only"
    return None


def graph_l2_state(n_copies: int, bytes_per_copy: int, device: str) -> str:
    """"rotated" when a replay's input copies together are at least twice the L2 (each call
    finds its inputs evicted), else "warm" (they may be L2-resident)."""
    return "rotated" if n_copies * bytes_per_copy >= 2 * cache_bytes(device) else "warm"


def launches_per_replay(eager_time_s: float, target_replay_s: float, max_launches: int) -> int:
    """Calls to capture per graph: about `target_replay_s` of work, at least 1, at most `max_launches`."""
    if eager_time_s <= 0 or target_replay_s <= 0 or max_launches < 1:
        raise ValueError("need eager_time_s > 0, target_replay_s > 0 and max_launches >= 1")
    return max(1, min(max_launches, int(target_replay_s / eager_time_s)))


def time_graph(
    run: Callable[[Inputs], object],
    input_sets: Sequence[Inputs],
    device: str,
    n_launches: int,
    n_replays: int,
) -> GraphTiming:
    """Capture `n_launches` calls of `run` (cycling `input_sets`) into one CUDA graph, replay it
    once untimed, then `n_replays` times between CUDA events; per-call median and spread.

    `run` must already have been called (compiled, autotuned) and must not synchronise the
    host. A capture error propagates (the caller records eager times only, with the reason).
    """
    if graph_unavailable_reason(device) is not None or n_launches < 1 or n_replays < 1:
        raise ValueError("time_graph needs a CUDA device, n_launches >= 1 and n_replays >= 1")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on a side stream, as torch.cuda.graph asks
        run(input_sets[0])
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(n_launches):
            run(input_sets[i % len(input_sets)])
    graph.replay()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_replays)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_replays)]
    for start, end in zip(starts, ends):
        start.record()
        graph.replay()
        end.record()
    torch.cuda.synchronize()
    per_call_s = [start.elapsed_time(end) / 1000.0 / n_launches for start, end in zip(starts, ends)]
    del graph
    return GraphTiming(statistics.median(per_call_s), statistics.pstdev(per_call_s), n_replays, n_launches)


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
