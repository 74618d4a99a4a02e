"""Attention of sliding-window and chunked-local layers, bounded by the window.

A windowed layer attends over at most the last W tokens: per new token at position p (1-based)
min(p, W) keys, and it reads at most the blocks it keeps (`sim.inputs.model.kv.window_blocks_per_seq`,
Wb tokens in whole blocks) plus, in a prefill chunk, the chunk's own. Chunked-local layers
(Llama-4) attend within the current W-token chunk: between 1 and W keys; they are priced with the
same bound (at most W keys; their mean over a long sequence is about W / 2), which keeps the cost
monotone in context.

Sums are over a step's sequences like `sim.cost.shapes.AttentionLoad`; every term is an integer
or a half-integer, so the scalar and the array sums agree bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Window:
    tokens: int  # W
    kept_tokens: int  # Wb: whole blocks a sequence keeps per windowed layer
    block_size: int


def pairs_within(q: np.ndarray, c: np.ndarray, w: int) -> np.ndarray:
    """Causal query-key pairs of q new tokens over c cached, each seeing at most w keys (minus q/2,
    as `AttentionLoad` counts pairs: q (c + q/2) when w is unbounded)."""
    q = np.asarray(q, dtype=np.int64)
    first = np.asarray(c, dtype=np.int64) + 1
    n_short = np.clip(np.minimum(first + q - 1, w) - first + 1, 0, None)  # positions <= w
    return n_short * first + n_short * (n_short - 1) / 2 + (q - n_short) * w - 0.5 * q


def kv_within(q: np.ndarray, c: np.ndarray, window: Window) -> np.ndarray:
    """KV tokens (whole blocks) a windowed layer reads for q new tokens over c cached."""
    b = window.block_size
    q = np.asarray(q, dtype=np.int64)
    held = -(-(np.asarray(c, dtype=np.int64) + q) // b) * b
    return np.minimum(held, window.kept_tokens + np.where(q > 1, -(-q // b) * b, 0))


def window_sums(q: np.ndarray, c: np.ndarray, window: Window) -> tuple[float, float, float, float]:
    """(prefill pairs, prefill KV tokens, decode pairs, decode KV tokens) of one step."""
    pairs = pairs_within(q, c, window.tokens)
    kv = kv_within(q, c, window)
    prefill, decode = q > 1, q == 1
    return (float(pairs[prefill].sum()), float(kv[prefill].sum()), float(pairs[decode].sum()),
            float(kv[decode].sum()))


def window_sums_scalar(new_tokens: list[int], cached_tokens: list[int], window: Window):
    """`window_sums` in plain Python (same values)."""
    w, kept, b = window.tokens, window.kept_tokens, window.block_size
    pairs_p = kv_p = pairs_d = kv_d = 0.0
    for q, c in zip(new_tokens, cached_tokens):
        if q < 1:
            continue
        first = c + 1
        n_short = max(0, min(first + q - 1, w) - first + 1)
        pairs = n_short * first + n_short * (n_short - 1) / 2 + (q - n_short) * w - 0.5 * q
        held = -(-(c + q) // b) * b
        if q == 1:
            pairs_d += pairs
            kv_d += min(held, kept)
        else:
            pairs_p += pairs
            kv_p += min(held, kept + -(-q // b) * b)
    return pairs_p, kv_p, pairs_d, kv_d


def decode_run_sums(contexts: np.ndarray, n_steps: int, window: Window) -> tuple[np.ndarray, np.ndarray]:
    """(pairs, KV tokens) per step of n_steps decode steps: sequence j has c_j + s cached at step s."""
    c = np.asarray(contexts, dtype=np.int64)[None, :] + np.arange(n_steps, dtype=np.int64)[:, None]
    ones = np.ones_like(c)
    return pairs_within(ones, c, window.tokens).sum(axis=1), kv_within(ones, c, window).sum(axis=1).astype(float)
