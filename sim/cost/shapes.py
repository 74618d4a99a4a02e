"""The attention load of a step: the few sums over sequences that attention cost depends on."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class AttentionLoad:
    """Sums over a step's sequences (arrays: one entry per step).

    prefill_* cover sequences bringing more than one new token, decode_* those bringing one.
    `*_pairs`/`decode_context`: query-key pairs (sum of q_j * (c_j + q_j / 2), causal).
    `*_kv_tokens`: KV tokens read, counted in whole blocks of the block size.
    """

    prefill_pairs: np.ndarray
    prefill_kv_tokens: np.ndarray
    prefill_tokens: np.ndarray
    decode_context: np.ndarray
    decode_kv_tokens: np.ndarray
    decode_tokens: np.ndarray

    @staticmethod
    def decode_run(contexts: np.ndarray, n_steps: int, block_size: int) -> AttentionLoad:
        """Loads of n_steps consecutive decode steps in which each sequence gains a token per step."""
        steps = np.arange(n_steps, dtype=np.int64)
        n_seqs = contexts.shape[0]
        # causal pairs per step: sum_j (c_j + s + 1/2) for the one new token of each sequence
        pairs = float(contexts.sum()) + n_seqs * (steps + 0.5)
        blocks = _whole_block_tokens_per_step(contexts, n_steps, block_size)
        zeros = np.zeros(n_steps)
        return AttentionLoad(
            prefill_pairs=zeros,
            prefill_kv_tokens=zeros,
            prefill_tokens=zeros,
            decode_context=pairs,
            decode_kv_tokens=blocks,
            decode_tokens=np.full(n_steps, float(n_seqs)),
        )


def _whole_block_tokens_per_step(contexts: np.ndarray, n_steps: int, block_size: int) -> np.ndarray:
    """Sum over sequences of ceil((c_j + s + 1) / B) * B, for s = 0..n_steps-1, without an n x k matrix.

    Each sequence's block count rises by one exactly at the steps where its length crosses a
    block boundary; a difference array over steps counts those crossings.
    """
    first = (contexts + 1 + block_size - 1) // block_size  # blocks at step 0
    base = float(first.sum())
    # step s has length c+s+1; a new block starts when (c+s+1) % B == 1, i.e. s = B*m - c for m >= first
    first_cross = first * block_size - contexts  # first step index at which one more block is needed
    delta = np.zeros(n_steps + 1)
    in_range = first_cross < n_steps
    if in_range.any():
        starts = first_cross[in_range]
        # crossings at starts, starts + B, starts + 2B, ... < n_steps
        counts = (n_steps - 1 - starts) // block_size + 1
        offsets = np.repeat(starts, counts) + block_size * _ranges(counts)
        np.add.at(delta, offsets, 1.0)
    return (base + np.cumsum(delta[:n_steps])) * block_size


def _ranges(counts: np.ndarray) -> np.ndarray:
    """Concatenation of arange(c) for each c in counts."""
    total = int(counts.sum())
    ends = np.cumsum(counts)
    return np.arange(total) - np.repeat(ends - counts, counts)


def attention_load(new_tokens: np.ndarray, cached_tokens: np.ndarray, block_size: int) -> AttentionLoad:
    """Attention load of one step (arrays of length 1)."""
    q = np.asarray(new_tokens, dtype=np.int64)
    c = np.asarray(cached_tokens, dtype=np.int64)
    total = c + q
    kv_tokens = ((total + block_size - 1) // block_size) * block_size
    pairs = q * (c + 0.5 * q)
    is_prefill = q > 1
    is_decode = q == 1

    def sums(mask):
        return (
            np.array([float(pairs[mask].sum())]),
            np.array([float(kv_tokens[mask].sum())]),
            np.array([float(q[mask].sum())]),
        )

    p_pairs, p_kv, p_tok = sums(is_prefill)
    d_pairs, d_kv, d_tok = sums(is_decode)
    return AttentionLoad(p_pairs, p_kv, p_tok, d_pairs, d_kv, d_tok)
