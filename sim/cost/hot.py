"""The simulator's hot path: step totals only, from the same formulas as `CostModel.breakdown`
(tests hold the two equal), with per-call work cut to a few scalar or O(batch) operations.

Token-count-dependent per-layer ops and the LM head come from lookup tables over token count;
attention is computed from a step's sums (`AttentionLoad` fields) in plain float arithmetic.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sim.cost.model import CostModel


class HotPath:
    def __init__(self, cost: CostModel):
        eff, model = cost.eff, cost.model
        self.cost = cost
        self.block_size = cost.block_size
        self.n_layers = model.n_layers
        self.p = eff.roofline_blend
        self.launch_s = eff.kernel_launch_us * 1e-6
        self.overhead_s = cost.overhead_s
        qh_d = cost.q_heads_gpu * model.head_dim
        attn_rate = cost.attn_peak_flops * eff.attention_compute
        self.pair_s = 4.0 * qh_d / attn_rate  # compute seconds per causal query-key pair
        self.kv_token_bytes = cost.kv_bytes_per_token_layer_gpu
        self.io_token_bytes = 2.0 * qh_d * cost.act_bytes_el  # q in, output out
        self.kv_bw = cost.bandwidth * cost._paged_eff  # prefill and decode both read paged KV
        self.prefill_ratio, self.decode_ratio = cost.prefill_ratio, cost.decode_ratio  # measured tables or None

    def _blend(self, t_compute: float, t_memory: float) -> float:
        top = max(t_memory, t_compute)
        if top <= 0.0 or math.isinf(self.p):
            return top
        return top * ((t_compute / top) ** self.p + (t_memory / top) ** self.p) ** (1.0 / self.p)

    def _attention_s(self, pairs: float, kv_tokens: float, n_tokens: float, bandwidth: float) -> float:
        if n_tokens <= 0:
            return 0.0
        t_memory = (kv_tokens * self.kv_token_bytes + n_tokens * self.io_token_bytes) / bandwidth
        return self._blend(pairs * self.pair_s, t_memory) + self.launch_s

    def step_time_s(self, new_tokens: np.ndarray, cached_tokens: np.ndarray, n_sampled: int) -> float:
        """Total time of one step of sequences bringing `new_tokens` over `cached_tokens`."""
        q = new_tokens
        c = cached_tokens
        size = self.block_size
        kv_tokens = -(-(c + q) // size) * size
        decode = q == 1
        n_decode = int(np.count_nonzero(decode))
        n_tokens = int(q.sum())
        if n_decode == q.shape[0]:
            prefill_s = 0.0
            pairs_d = float(c.sum()) + 0.5 * n_decode
            kv_d = float(kv_tokens.sum())
        else:
            prefill = q > 1  # sequences bringing no token this step cost nothing
            qp = q[prefill]
            pairs_p = float((qp * (c[prefill] + 0.5 * qp)).sum())
            prefill_s = self._attention_s(pairs_p, float(kv_tokens[prefill].sum()), float(qp.sum()), self.kv_bw)
            if self.prefill_ratio is not None:
                prefill_s *= float(self.prefill_ratio.factor(pairs_p))
            pairs_d = float(c[decode].sum()) + 0.5 * n_decode
            kv_d = float(kv_tokens[decode].sum())
        decode_s = self._attention_s(pairs_d, kv_d, n_decode, self.kv_bw)
        if self.decode_ratio is not None and n_decode:
            decode_s *= float(self.decode_ratio.factor(kv_d))
        layer_s = self.cost.layer_time_s(n_tokens) + prefill_s + decode_s
        return self.n_layers * layer_s + self.cost.lm_head_time_s(n_sampled) + self.overhead_s

    def decode_run(self, contexts: np.ndarray, n_steps: int) -> tuple[np.ndarray, np.ndarray]:
        """(times, KV tokens in whole blocks) of n_steps consecutive decode steps in which each
        sequence gains one token; the second array is what the block pool holds at each step."""
        n = contexts.shape[0]
        if n == 0:
            return np.full(n_steps, self.overhead_s), np.zeros(n_steps)
        size = self.block_size
        steps = np.arange(n_steps, dtype=np.float64)
        pairs = float(contexts.sum()) + n * (steps + 0.5)
        kv_tokens = whole_block_tokens_per_step(contexts, n_steps, size)
        t_compute = pairs * self.pair_s
        t_memory = (kv_tokens * self.kv_token_bytes + n * self.io_token_bytes) / self.kv_bw
        # roofline.blend inlined: its general guards cost ~5% of a whole replay on this path (n > 0 here)
        if math.isinf(self.p):
            attention = np.maximum(t_compute, t_memory)
        else:
            top = np.maximum(t_compute, t_memory)
            attention = top * ((t_compute / top) ** self.p + (t_memory / top) ** self.p) ** (1.0 / self.p)
        attention = attention + self.launch_s
        if self.decode_ratio is not None:
            attention = attention * self.decode_ratio.factor(kv_tokens)
        fixed_s = self.n_layers * self.cost.layer_time_s(n) + self.cost.lm_head_time_s(n) + self.overhead_s
        return self.n_layers * attention + fixed_s, kv_tokens


def whole_block_tokens_per_step(contexts: np.ndarray, n_steps: int, block_size: int) -> np.ndarray:
    """KV tokens read per decode step, in whole blocks: sum_j ceil((c_j + s + 1) / B) * B for
    s = 0..n_steps-1. Sequence j needs one more block at every step s >= 1 with (c_j + s) % B == 0,
    so the crossings of step s are the number of sequences with residue (-c_j) mod B == s mod B."""
    base_blocks = float((-(-(contexts + 1) // block_size)).sum())
    if n_steps == 1:
        return np.array([base_blocks * block_size])
    per_residue = np.bincount((-contexts) % block_size, minlength=block_size).astype(np.float64)
    if n_steps <= block_size:  # crossings[s] = per_residue[s % B]
        crossings = per_residue[:n_steps].copy()
    else:
        crossings = np.tile(per_residue, n_steps // block_size + 1)[:n_steps]
    crossings[0] = 0.0
    return (base_blocks + np.cumsum(crossings)) * block_size
