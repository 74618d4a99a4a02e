"""Step times of a decode run that goes on past finishes (sim/sched/past_finishes.py), in plain
Python: `HotPath.decode_steps_until` with sequences leaving the batch as they finish. Each step's
time is that of a single step of the sequences still going (same quantities, same float
arithmetic as `HotPath.step_time_s_scalar`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sim.cost.hot import _residue_histogram

if TYPE_CHECKING:
    from sim.cost.hot import HotPath


@dataclass
class RunPastFinishes:
    """One entry per step: its time, the blocks it takes, the KV tokens (whole blocks) its
    sequences read, and how many sequences it computes."""

    times_s: list[float]
    taken: list[int]
    kv_tokens: list[int]
    n_active: list[int]


def decode_steps_past_finishes(hot: HotPath, contexts: list[int], remaining: list[int], start_s: float,
                               horizon_s: float, max_steps: int, free_blocks: int) -> RunPastFinishes | None:
    """Decode steps of sequences with these `contexts` from `start_s`; sequence j computes
    `remaining[j]` more tokens and then leaves. Stops after the step during which `horizon_s`
    falls, before a step whose new blocks would exceed `free_blocks` (blocks of finished sequences
    count as taken), when everyone has left, or at `max_steps`. None when a measured decode table
    applies (the caller plans a plain run)."""
    if hot.decode_ratio is not None:
        return None
    size, layers, launch_s = hot.block_size, hot.n_layers, hot.launch_s
    kv_token_bytes, kv_bw, pair_s = hot.kv_token_bytes, hot.kv_bw, hot.pair_s
    leaving: dict[int, list[int]] = {}
    for c, n_left in zip(contexts, remaining):
        leaving.setdefault(n_left, []).append(c)
    bounds = sorted(s for s in leaving if s < max_steps)
    bounds.append(max_steps)
    n = len(contexts)
    total, taken_at, blocks = _residue_histogram(contexts, size)
    out = RunPastFinishes([], [], [], [])
    times, taken, kv_tokens = out.times_s, out.taken, out.kv_tokens
    elapsed_s, free, step = 0.0, free_blocks, 0
    for segment_end in bounds:  # steps [step, segment_end) compute the same sequences
        fixed_s = layers * hot.cost.layer_time_s(n) + hot.cost.lm_head_time_s(n) + hot.overhead_s
        io_bytes = n * hot.io_token_bytes
        # as in `decode_steps_until`: the segment's least memory time against its most compute
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
            time_s = attention_s * layers + fixed_s
            times.append(time_s)
            taken.append(take)
            kv_tokens.append(kv)
            elapsed_s += time_s
            if elapsed_s + start_s >= horizon_s:
                return _with_active(out, first, n)
        _with_active(out, first, n)
        step = segment_end
        for c in leaving.get(step, ()):  # they computed their last token in the step just before
            n -= 1
            total -= c
            taken_at[-c % size] -= 1
            blocks -= -(-(c + step) // size)
        if not n:
            break
    return out


def _with_active(run: RunPastFinishes, first_step: int, n_seqs: int) -> RunPastFinishes:
    """Fill `run.n_active` for the steps from `first_step` on (they compute `n_seqs` sequences)."""
    run.n_active += [n_seqs] * (len(run.times_s) - first_step)
    return run
