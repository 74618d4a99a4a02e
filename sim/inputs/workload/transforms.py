"""Trace transformations: time window, rate scaling, clipping to max_model_len, sampling
N requests and shuffling lengths. Each returns a new Trace sorted by arrival.

`apply_transforms` runs them in one fixed order (window, sample, shuffle, rate, clip),
so a spec's result does not depend on the order its keys are written in.
"""

from __future__ import annotations

import math

import numpy as np

from sim.errors import InputError
from sim.inputs.budget import MAX_TIME_S
from sim.inputs.workload.trace import Trace
from sim.schema import MAX_RATE_QPS


def mean_qps(trace: Trace) -> float | None:
    """Requests per second over the span first..last arrival (None when that span is 0)."""
    if len(trace) == 0:
        return None
    duration_s = float(trace.arrival_s[-1] - trace.arrival_s[0])
    return len(trace) / duration_s if duration_s > 0 else None


def extend(trace: Trace, n_requests: int) -> Trace:
    """The same workload with at least `n_requests` requests: a longer draw of the process it came from
    where it has one (`trace.redraw`: a synthetic spec run longer, fresh arrivals), else the trace
    tiled (`tile`). A steady-state check runs this when a workload is too short to judge
    (sim.run.steady_state): repeating one short draw would show the same few bursts again and again,
    where a longer draw of a Poisson process shows the rarer, larger ones a deployment meets."""
    if n_requests <= len(trace):
        return trace
    if trace.redraw is not None:
        longer = trace.redraw(n_requests)
        if len(longer) >= n_requests:
            return longer
    return tile(trace, n_requests)


def tile(trace: Trace, n_requests: int) -> Trace:
    """The trace repeated end to end until it holds `n_requests` requests (the last copy cut), each copy
    starting one mean inter-arrival gap after the previous one ends, so the mean rate is unchanged. What
    a steady-state check runs when a workload is shorter than a few request lifetimes
    (sim.run.steady_state). A copy is new traffic of the same shape: its prefix hash ids are shifted past
    every id of the copies before it, so prefixes are shared within a copy as in the original and never
    across copies (repeating the ids would serve every later copy from the prefix cache)."""
    n = len(trace)
    if n < 2 or n_requests <= n:
        return trace.take(np.arange(min(n, max(n_requests, 0))))
    gap_s = float(trace.arrival_s[-1] - trace.arrival_s[0]) / (n - 1)
    period_s = float(trace.arrival_s[-1] - trace.arrival_s[0]) + gap_s
    rows, copy = np.arange(n_requests) % n, np.arange(n_requests) // n
    tiled = trace.take(rows)
    tiled.arrival_s = trace.arrival_s[rows] + copy * period_s
    if tiled.hash_ids_flat is not None and tiled.hash_ids_flat.size:
        id_span = int(trace.hash_ids_flat.max()) - int(trace.hash_ids_flat.min()) + 1
        shift = np.repeat(copy * id_span, np.diff(tiled.hash_offsets))
        tiled.hash_ids_flat = tiled.hash_ids_flat.astype(np.int64) + shift
    return tiled


def time_window(trace: Trace, start_s: float, end_s: float, where: str = "time_window_s") -> Trace:
    """Requests with start_s <= arrival < end_s, re-timed so the window starts at 0 s."""
    if not 0 <= start_s < end_s:
        raise InputError(where, None, f"needs 0 <= start < end; got [{start_s}, {end_s}]")
    keep = np.flatnonzero((trace.arrival_s >= start_s) & (trace.arrival_s < end_s))
    if len(keep) == 0:
        raise InputError(where, None, f"[{start_s}, {end_s}) holds no request of {trace.source}")
    window = trace.take(keep)
    window.arrival_s = window.arrival_s - start_s
    return window


def scale_rate(
    trace: Trace,
    factor: float | None = None,
    target_qps: float | None = None,
    where: str = "rate_scale",
) -> Trace:
    """Compress time by `factor` (2.0 = twice the request rate), or pick the factor that makes
    `mean_qps` equal `target_qps`. Lengths and order are unchanged."""
    if (factor is None) == (target_qps is None):
        raise InputError(where, None, "give exactly one of a factor and a target QPS")
    if target_qps is not None:
        current_qps = mean_qps(trace)
        if current_qps is None:
            raise InputError(where, "target_qps", "the trace spans 0 s; no rate to scale")
        factor = target_qps / current_qps
    if not (factor > 0 and math.isfinite(factor)):
        raise InputError(where, None, f"the factor must be a finite number > 0; got {factor}")
    scaled = trace.take(np.arange(len(trace)))
    with np.errstate(over="ignore"):
        scaled.arrival_s = trace.arrival_s / factor
    span_s = float(scaled.arrival_s.max()) if len(scaled) else 0.0
    if not span_s <= MAX_TIME_S:  # a tiny factor stretches the trace past any finite clock
        raise InputError(where, None, f"a factor of {factor:g} makes the trace span {span_s:g} s; at most "
                                      f"{MAX_TIME_S:g} s (a larger factor)")
    first_to_last_s = span_s - float(scaled.arrival_s.min()) if len(scaled) > 1 else 0.0
    if first_to_last_s > 0 and (len(scaled) - 1) > MAX_RATE_QPS * first_to_last_s:  # no overflow in the test
        raise InputError(where, None, f"a factor of {factor:g} makes the trace's {len(scaled):,} requests arrive "
                                      f"within {first_to_last_s:.3g} s, faster than {MAX_RATE_QPS:g} requests/s "
                                      "(one a nanosecond; all at once is --qps inf): a smaller factor")
    return scaled


def clip_max_model_len(
    trace: Trace, max_model_len: int, where: str = "clip_max_model_len"
) -> Trace:
    """Make every prompt + output fit in `max_model_len`: a prompt longer than
    max_model_len - 1 is truncated to it (keeping its head, as a client truncating the
    history would), then output = min(output, max_model_len - prompt). A truncated prompt
    keeps the hash ids of its whole blocks; a partly kept last block gets a fresh id
    (its content is no longer the original block's)."""
    if max_model_len < 2:
        raise InputError(
            where, None, f"must be >= 2 (one prompt and one output token); got {max_model_len}"
        )
    prompt = np.minimum(trace.prompt_tokens, max_model_len - 1)
    clipped = trace.take(np.arange(len(trace)))
    clipped.prompt_tokens = prompt
    clipped.output_tokens = np.minimum(trace.output_tokens, max_model_len - prompt)
    if trace.has_hash_ids:
        _truncate_hash_ids(clipped, truncated=prompt < trace.prompt_tokens)
    return clipped


def _truncate_hash_ids(trace: Trace, truncated: np.ndarray) -> None:
    """Drop ids past each prompt's last block; fresh ids for partly kept blocks (in place)."""
    block = trace.hash_block_tokens
    lengths = np.diff(trace.hash_offsets)
    kept = np.where(truncated, np.minimum(lengths, -(-trace.prompt_tokens // block)), lengths)
    row_of = np.repeat(np.arange(len(trace)), lengths)
    position = np.arange(len(trace.hash_ids_flat)) - trace.hash_offsets[row_of]
    flat = trace.hash_ids_flat[position < kept[row_of]].copy()
    offsets = np.zeros(len(trace) + 1, dtype=np.int64)
    np.cumsum(kept, out=offsets[1:])
    partial = truncated & (trace.prompt_tokens % block != 0) & (kept > 0)
    fresh_from = int(trace.hash_ids_flat.max()) + 1 if len(trace.hash_ids_flat) else 0
    flat[offsets[1:][partial] - 1] = fresh_from + np.arange(int(partial.sum()))
    trace.hash_ids_flat, trace.hash_offsets = flat, offsets


def sample_requests(
    trace: Trace, n: int, rng: np.random.Generator, where: str = "sample_n"
) -> Trace:
    """`n` requests drawn without replacement, kept at their own arrival times (so the
    rate drops by n / len(trace)); use rate scaling to restore it."""
    if not 1 <= n <= len(trace):
        raise InputError(
            where, None, f"must be between 1 and the trace's {len(trace)} requests; got {n}"
        )
    return trace.take(np.sort(rng.choice(len(trace), size=n, replace=False)))


def shuffle_lengths(trace: Trace, rng: np.random.Generator) -> Trace:
    """Permute requests (lengths, hash ids, extras) among the arrival slots; the arrival
    times stay where they were, sorted."""
    shuffled = trace.take(rng.permutation(len(trace)))
    shuffled.arrival_s = trace.arrival_s.copy()
    return shuffled


def apply_transforms(
    trace: Trace,
    *,
    time_window_s: tuple[float, float] | None = None,
    sample_n: int | None = None,
    shuffle_seed: int | None = None,
    rate_scale: float | None = None,
    target_qps: float | None = None,
    clip_max_model_len_tokens: int | None = None,
    seed: int = 0,
) -> Trace:
    """Run the requested transforms in the fixed order window, sample, shuffle, rate, clip.
    Sampling draws from `seed`; shuffling from `shuffle_seed`."""
    if time_window_s is not None:
        trace = time_window(trace, *time_window_s)
    if sample_n is not None:
        trace = sample_requests(trace, sample_n, np.random.default_rng(seed))
    if shuffle_seed is not None:
        trace = shuffle_lengths(trace, np.random.default_rng(shuffle_seed))
    if rate_scale is not None or target_qps is not None:
        trace = scale_rate(trace, rate_scale, target_qps)
    if clip_max_model_len_tokens is not None:
        trace = clip_max_model_len(trace, clip_max_model_len_tokens)
    return trace
