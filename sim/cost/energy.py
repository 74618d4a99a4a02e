"""How long a step keeps the tensor cores and HBM busy at their peaks: the step's FLOPs over peak
FLOP/s and its HBM bytes over peak bandwidth, from the same op formulas `CostModel.breakdown` sums
(per-layer ops and the LM head from lookup tables over token count, attention from a step's sums).
Divided by the step's time they are its compute and memory utilisations, which set its power
(sim/inputs/power.py). Network ops (all-reduce) move link bytes, not HBM bytes: not counted."""

from __future__ import annotations

import numpy as np

from sim.cost.model import CostModel


def plain_cost_model(cost) -> CostModel | None:
    """The roofline `CostModel` under an engine wrapper, or None for another layout's model
    (pipeline stages, expert parallelism: their per-step work is not tabulated yet)."""
    gpu = getattr(cost, "gpu", cost)
    return gpu if type(gpu) is CostModel else None


class StepWork:
    """(compute_s, memory_s) of steps of one GPU of a replica costed by `cost`."""

    def __init__(self, cost: CostModel):
        self.cost = cost
        self.n_layers = cost.model.n_layers
        attn_peak = cost.attn_peak_flops * cost.time_scale["attention"]  # the hardware's, unscaled
        self.prefill_pair_s = cost.pair_flops["prefill_attention"] / attn_peak
        self.decode_pair_s = cost.pair_flops["decode_attention"] / attn_peak
        self.kv_token_s = cost.kv_bytes_per_token_layer_gpu / cost.bandwidth
        self.io_token_s = 2.0 * cost.q_heads_gpu * cost.model.head_dim * cost.act_bytes_el / cost.bandwidth
        self._layer = np.zeros((2, 0))
        self._lm = np.zeros((2, 0))
        self._layer_lists: tuple[list, list] = ([], [])  # the same tables as Python floats (the scalar path)
        self._lm_lists: tuple[list, list] = ([], [])

    def _busy(self, ops) -> np.ndarray:
        compute = sum(flops for _, _, flops, _, bound in ops if not np.all(np.asarray(bound) == "network"))
        memory = sum(bytes_ for _, _, _, bytes_, bound in ops if not np.all(np.asarray(bound) == "network"))
        return np.stack([np.asarray(compute, dtype=np.float64) / self.cost.peak_flops,
                         np.asarray(memory, dtype=np.float64) / self.cost.bandwidth])

    def _layer_at(self, n_tokens: np.ndarray) -> np.ndarray:
        top = int(np.max(n_tokens))
        if top >= self._layer.shape[1]:
            grid = np.arange(max(2 * top + 1, 1024), dtype=np.float64)
            self._layer = self._busy(self.cost._layer_ops(grid))
            self._layer_lists = (self._layer[0].tolist(), self._layer[1].tolist())
        return self._layer[:, n_tokens]

    def _lm_at(self, n_sampled: np.ndarray) -> np.ndarray:
        top = int(np.max(n_sampled))
        if top >= self._lm.shape[1]:
            grid = np.arange(max(2 * top + 1, 1024), dtype=np.float64)
            self._lm = self._busy([self.cost._lm_head_op(grid)])
            self._lm_lists = (self._lm[0].tolist(), self._lm[1].tolist())
        return self._lm[:, n_sampled]

    def steps(self, n_tokens, n_sampled, prefill_pairs, decode_pairs, kv_tokens) -> tuple[np.ndarray, np.ndarray]:
        """Per step (arrays of equal length): tokens computed, tokens sampled, causal query-key pairs
        of prefill and of decode sequences, KV tokens read. Returns (compute_s, memory_s)."""
        n_tokens = np.asarray(n_tokens, dtype=np.int64)
        layer = self._layer_at(n_tokens)
        lm = self._lm_at(np.asarray(n_sampled, dtype=np.int64))
        compute = (layer[0] + np.asarray(prefill_pairs) * self.prefill_pair_s
                   + np.asarray(decode_pairs) * self.decode_pair_s)
        memory = layer[1] + np.asarray(kv_tokens) * self.kv_token_s + n_tokens * self.io_token_s
        return self.n_layers * compute + lm[0], self.n_layers * memory + lm[1]

    def step(self, n_tokens: int, n_sampled: int, prefill_pairs: float, decode_pairs: float,
             kv_tokens: float) -> tuple[float, float]:
        """`steps` of one step in plain Python floats (a step of a few sequences is most steps)."""
        if n_tokens >= len(self._layer_lists[0]):
            self._layer_at(np.array([n_tokens]))
        if n_sampled >= len(self._lm_lists[0]):
            self._lm_at(np.array([n_sampled]))
        compute = (self._layer_lists[0][n_tokens] + prefill_pairs * self.prefill_pair_s
                   + decode_pairs * self.decode_pair_s)
        memory = self._layer_lists[1][n_tokens] + kv_tokens * self.kv_token_s + n_tokens * self.io_token_s
        return (self.n_layers * compute + self._lm_lists[0][n_sampled],
                self.n_layers * memory + self._lm_lists[1][n_sampled])

    def decode_steps(self, n_seqs: int, context_sums: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`steps` of a decode run's steps of `n_seqs` sequences each (one token each, sampled),
        over `context_sums` cached tokens (summed over the sequences) before each step."""
        self.step(n_seqs, n_seqs, 0.0, 0.0, 0.0)  # grows the tables to n_seqs
        layer_c, layer_m = self._layer_lists[0][n_seqs], self._layer_lists[1][n_seqs]
        lm_c, lm_m = self._lm_lists[0][n_seqs], self._lm_lists[1][n_seqs]
        compute = (context_sums + 0.5 * n_seqs) * (self.n_layers * self.decode_pair_s)
        compute += self.n_layers * layer_c + lm_c
        memory = (context_sums + n_seqs) * (self.n_layers * self.kv_token_s)
        memory += self.n_layers * (layer_m + n_seqs * self.io_token_s) + lm_m
        return compute, memory
