"""Blocks and whole-block KV tokens of decode steps from the sequences' block residues: a sequence
with c cached tokens is (-c) mod B tokens short of a whole block and takes a new block every B
steps from then on. Shared by the hot path (sim/cost/hot.py) and the decode-run planner.
"""

from __future__ import annotations

import operator

import numpy as np

HISTOGRAM_LOOP_MAX_SEQS = 32  # a decode run's residue histogram: a Python loop up to this many, numpy above

_HALF_STEPS = np.arange(4096, dtype=np.float64) + 0.5


def half_steps(n_steps: int) -> np.ndarray:
    """[0.5, 1.5, ..., n_steps - 0.5] (a view of a shared table; do not mutate)."""
    global _HALF_STEPS
    if n_steps > _HALF_STEPS.shape[0]:
        _HALF_STEPS = np.arange(2 * n_steps, dtype=np.float64) + 0.5
    return _HALF_STEPS[:n_steps]


def residue_histogram(contexts: np.ndarray | list[int], size: int) -> tuple[int, list[int], int]:
    """(tokens cached, sequences taking a new block at steps s with s % size == r for each r,
    blocks held): `residue_counts` as Python ints, by a plain loop for a few sequences."""
    if isinstance(contexts, np.ndarray) and contexts.shape[0] > HISTOGRAM_LOOP_MAX_SEQS:
        counts, held = residue_counts(contexts, size)
        return int(np.add.reduce(contexts)), counts.tolist(), held
    if isinstance(contexts, np.ndarray):
        contexts = contexts.tolist()
    taken_at = [0] * size
    for c in contexts:
        taken_at[-c % size] += 1
    total = sum(contexts)
    return total, taken_at, (total + sum(map(operator.mul, range(size), taken_at))) // size


def residue_counts(contexts: np.ndarray, block_size: int) -> tuple[np.ndarray, int]:
    """(how many sequences are r tokens short of a whole block, for r = 0..B-1; blocks held).

    A sequence with c cached tokens holds ceil(c / B) blocks and is r = (-c) mod B tokens short
    of filling them: it takes a new block at decode steps s = r, r + B, r + 2B, ... (0-based)."""
    residues = (-contexts) % block_size
    held = (int(contexts.sum()) + int(residues.sum())) // block_size
    return np.bincount(residues, minlength=block_size), held


def blocks_for_steps(counts: list[int], n_seqs: int, n_steps: int) -> int:
    """Extra blocks n_steps decode steps take, from `residue_counts` (as a list): every B steps
    each sequence takes one, and the first n_steps mod B steps take those with residue below it."""
    whole, part = divmod(n_steps, len(counts))
    return whole * n_seqs + sum(counts[:part])


def whole_block_tokens_per_step(contexts: np.ndarray, n_steps: int, block_size: int,
                                total_tokens: int | None = None) -> np.ndarray:
    """KV tokens read per decode step, in whole blocks: sum_j ceil((c_j + s + 1) / B) * B for
    s = 0..n_steps-1, i.e. (blocks held + blocks taken by steps 0..s) * B (see `residue_counts`).
    `total_tokens` (sum of contexts) may be passed when already known."""
    residues = (-contexts) % block_size
    total = int(np.add.reduce(contexts)) if total_tokens is None else total_tokens
    held = (total + int(np.add.reduce(residues))) // block_size
    counts = np.bincount(residues, minlength=block_size)
    taken_per_step = counts[:n_steps] if n_steps <= block_size else counts[_cyclic_index(n_steps, block_size)]
    taken = np.add.accumulate(taken_per_step, dtype=np.float64)
    taken += held
    taken *= block_size
    return taken


_CYCLIC: dict[int, np.ndarray] = {}


def _cyclic_index(n_steps: int, block_size: int) -> np.ndarray:
    """[0, 1, ..., B-1, 0, 1, ...] of length n_steps (a view of a shared table; do not mutate)."""
    index = _CYCLIC.get(block_size)
    if index is None or index.shape[0] < n_steps:
        index = np.arange(max(n_steps, 4096)) % block_size
        _CYCLIC[block_size] = index
    return index[:n_steps]
