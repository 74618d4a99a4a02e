"""Decode steps run past sequences' finishes in one call (sim/engine/sched/past_finishes.py): per step its
time, blocks taken, KV tokens read and sequences computed, from the hot path's step formula.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.cost.block_residues import HISTOGRAM_LOOP_MAX_SEQS, residue_histogram
from sim.cost.views import HotPathView
from sim.cost.window import window_sums_scalar


@dataclass
class RunPastFinishes:
    """One entry per step: its time, the blocks it takes, the KV tokens (whole blocks) its
    sequences read, and how many sequences it computes; whether the horizon ended it."""

    times_s: list[float]
    taken: list[int]
    kv_tokens: list[int]
    n_active: list[int]
    reached_horizon: bool = False


def decode_steps_past_finishes(hot: HotPathView, contexts: list[int] | np.ndarray, remaining: list[int] | np.ndarray,
                               start_s: float, horizon_s: float, max_steps: int,
                               free_blocks: float) -> RunPastFinishes | None:
    """Decode steps of sequences with these `contexts` from `start_s`; sequence j computes
    `remaining[j]` more tokens and then leaves. Stops after the step during which `horizon_s`
    falls, before a step whose new blocks would exceed `free_blocks` (blocks of finished sequences
    count as taken), when everyone has left, or at `max_steps`. None when a measured decode table
    applies (the caller plans a plain run)."""
    if hot.decode_ratio is not None:
        return None
    active = sorted(_as_list(contexts)) if hot.window is not None else None  # windowed layers: per sequence
    size, layers, launch_s = hot.block_size, hot.n_layers, hot.launch_s
    kv_token_bytes, kv_bw, pair_s = hot.kv_token_bytes, hot.kv_bw, hot.pair_s
    n = len(contexts)
    if n <= HISTOGRAM_LOOP_MAX_SEQS:  # a few: plain Python throughout
        contexts, remaining = _as_list(contexts), _as_list(remaining)
    total, taken_at, blocks = residue_histogram(contexts, size)
    leaving_at, leaving_contexts = _by_steps_left(contexts, remaining)  # ascending steps left
    next_leaver = 0  # index into them
    out = RunPastFinishes([], [], [], [])
    times, taken, kv_tokens = out.times_s, out.taken, out.kv_tokens
    elapsed_s, free, step = 0.0, free_blocks, 0
    while True:  # steps [step, segment_end) compute the same sequences
        segment_end = min(leaving_at[next_leaver], max_steps) if n else max_steps
        fixed_s = layers * hot.cost.layer_time_s(n) + hot.cost.lm_head_time_s(n) + hot.overhead_s
        io_bytes = n * hot.io_token_bytes
        # the least memory time is the segment's first step's, the most compute its last's: when even
        # those are apart by `negligible_ratio`, every step's blend is its memory time (see HotPath)
        first_kv = (blocks + taken_at[step % size]) * size
        last_compute_s = (total + n * (segment_end - 0.5)) * pair_s
        memory_bound = last_compute_s < (first_kv * kv_token_bytes + io_bytes) / kv_bw * hot.negligible_ratio
        first = step
        for step in range(first, segment_end):
            take = taken_at[step % size]
            if take > free:
                return _with_active(out, first, n)
            free -= take
            blocks += take
            kv = blocks * size
            t_memory = (kv * kv_token_bytes + io_bytes) / kv_bw
            if memory_bound:
                attention_s = t_memory + launch_s
            else:
                attention_s = hot._blend((total + n * (step + 0.5)) * pair_s, t_memory) + launch_s
            if active is not None:
                _, _, pairs_w, kv_w = window_sums_scalar([1] * n, [a + step for a in active], hot.window)
                attention_s += hot._window_s(pairs_w, kv_w, n, False)
            time_s = attention_s * layers + fixed_s
            times.append(time_s)
            taken.append(take)
            kv_tokens.append(kv)
            elapsed_s += time_s
            if elapsed_s + start_s >= horizon_s:
                out.reached_horizon = True
                return _with_active(out, first, n)
        _with_active(out, first, n)
        step = segment_end
        if step >= max_steps:
            break
        while n and leaving_at[next_leaver] == step:  # their last token was the step before
            c = leaving_contexts[next_leaver]
            if active is not None:
                active.remove(c)
            next_leaver += 1
            n -= 1
            total -= c
            taken_at[-c % size] -= 1
            blocks -= -(-(c + step) // size)
        if not n:
            break
    return out


def _by_steps_left(contexts: list[int] | np.ndarray, remaining: list[int] | np.ndarray) -> tuple[list[int], list[int]]:
    """(steps left, context) of each sequence as two lists, in ascending steps left (numpy sorts
    many, arrays; Python a few, lists)."""
    if len(contexts) > HISTOGRAM_LOOP_MAX_SEQS:
        steps_left = np.asarray(remaining)
        order = steps_left.argsort(kind="stable")
        return steps_left[order].tolist(), np.asarray(contexts)[order].tolist()
    pairs = sorted(zip(remaining, contexts))
    return [r for r, _ in pairs], [c for _, c in pairs]


def _as_list(values: list[int] | np.ndarray) -> list[int]:
    return values.tolist() if isinstance(values, np.ndarray) else values


def _with_active(run: RunPastFinishes, first_step: int, n_seqs: int) -> RunPastFinishes:
    """Fill `run.n_active` for the steps from `first_step` on (they compute `n_seqs` sequences)."""
    run.n_active += [n_seqs] * (len(run.times_s) - first_step)
    return run
