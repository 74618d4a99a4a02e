"""Prefix sharing in a trace, as an infinite prefix cache would see it."""

from __future__ import annotations

import numpy as np

from sim.inputs.workload.trace import Trace


def prefix_hit_tokens_infinite(trace: Trace) -> np.ndarray | None:
    """Per request (arrival order): prompt tokens an infinite cache would already hold.

    A request hits the longest run of its hash ids, from the start, each of which appeared
    in some earlier request; hit tokens = run length x `hash_block_tokens`, capped at the
    prompt length. Returns None when the trace has no hash ids. Vectorised: an id is
    "seen" in row i iff its first occurrence is in a row before i.
    """
    if not trace.has_hash_ids:
        return None
    flat, offsets = trace.hash_ids_flat, trace.hash_offsets
    n_rows = len(trace)
    lengths = np.diff(offsets)
    row_of = np.repeat(np.arange(n_rows, dtype=np.int64), lengths)
    _, first_index, inverse = np.unique(flat, return_index=True, return_inverse=True)
    seen_before = row_of[first_index][inverse] < row_of  # rows are in order along `flat`
    position = np.arange(len(flat), dtype=np.int64) - offsets[row_of]
    first_miss = np.where(seen_before, np.iinfo(np.int64).max, position)
    run = lengths.copy()
    nonempty = lengths > 0
    if nonempty.any():
        first_miss_per_row = np.minimum.reduceat(first_miss, offsets[:-1][nonempty])
        run[nonempty] = np.minimum(first_miss_per_row, lengths[nonempty])
    return np.minimum(run * int(trace.hash_block_tokens), trace.prompt_tokens)


def prefix_hit_rate_infinite(trace: Trace) -> float | None:
    """Share of all prompt tokens an infinite prefix cache would serve (None without hash ids)."""
    hits = prefix_hit_tokens_infinite(trace)
    if hits is None:
        return None
    return float(hits.sum() / trace.prompt_tokens.sum())
