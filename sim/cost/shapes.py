"""The attention load of a step: the few sums over sequences that attention cost depends on."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class AttentionLoad:
    """Sums over a step's sequences (arrays: one entry per step).

    prefill_* cover sequences bringing more than `decode_query_tokens` new tokens (1 unless told),
    decode_* those bringing 1 to that many (a speculative verify's k+1 on a decode kernel that takes
    several query tokens per sequence: `CostModel.decode_query_max`).
    `*_pairs`/`decode_context`: query-key pairs (sum of q_j * (c_j + q_j / 2), causal).
    `*_kv_tokens`: KV tokens read, counted in whole blocks of the block size.
    """

    prefill_pairs: np.ndarray
    prefill_kv_tokens: np.ndarray
    prefill_tokens: np.ndarray
    decode_context: np.ndarray
    decode_kv_tokens: np.ndarray
    decode_tokens: np.ndarray


def attention_load(new_tokens: np.ndarray, cached_tokens: np.ndarray, block_size: int,
                   decode_query_tokens: int = 1) -> AttentionLoad:
    """Attention load of one step (arrays of length 1)."""
    q = np.asarray(new_tokens, dtype=np.int64)
    c = np.asarray(cached_tokens, dtype=np.int64)
    total = c + q
    kv_tokens = ((total + block_size - 1) // block_size) * block_size
    pairs = q * (c + 0.5 * q)
    is_prefill = q > decode_query_tokens
    is_decode = (q >= 1) & ~is_prefill

    def sums(mask):
        return (
            np.array([float(pairs[mask].sum())]),
            np.array([float(kv_tokens[mask].sum())]),
            np.array([float(q[mask].sum())]),
        )

    p_pairs, p_kv, p_tok = sums(is_prefill)
    d_pairs, d_kv, d_tok = sums(is_decode)
    return AttentionLoad(p_pairs, p_kv, p_tok, d_pairs, d_kv, d_tok)
