"""Routed experts of one MoE layer on one GPU: a grouped GEMM over the tokens each active expert
receives, reading the weights of the experts the step touches.

For T tokens routed top-k of the n experts a rank holds (uniform, independent routing), the
expected number of distinct experts touched is n * (1 - (1 - k/n)^T): one token reads k experts,
a large batch all n (decode of a small batch is memory-bound on the active experts, not on all of
them; prefill touches all). Each touched expert multiplies T*k/touched tokens on average: the
grouped GEMM's compute efficiency ramps with that M (the same ramp as a dense GEMM,
`sim.cost.roofline.gemm_compute_efficiency`), so many experts with few tokens each run far
below the tensor-core ceiling.

Load imbalance: `load_imbalance` = max / mean tokens per expert *rank* of a step (DeepSeek-V3
report, arXiv:2412.19437 sec. 3.4, balances exactly this with its redundant experts, EPLB; the
published measurements, DeepSeek's EPLB and SGLang's large-scale EP / Waterfill-LPLB posts, are of
tokens per EP *GPU*). It stretches the compute term only when the experts are split over ranks
(`n_ranks` > 1, expert parallelism, sim/cost/expert_parallel.py). On one GPU or under tensor
parallelism every GPU runs a slice of every expert: no GPU waits for a busier one, and an uneven
split of tokens over experts changes only the per-expert GEMM shapes. It enters no term there,
because uniform routing is already the slowest case this model prices: (1) the distinct experts
touched, sum_e 1 - (1 - p_e)^T over expert probabilities p_e summing to k, is concave in p, so
uniform p_e = k/n touches the most (Jensen): most weight bytes; (2) the efficiency ramp
M / (M + half_M) makes an expert's compute time proportional to m_e + half_M, so the experts'
total is (T k + touched x half_M) / (peak x ceiling): it depends on the split only through the
touched count, again largest when uniform. A measured per-expert token distribution (none
published for a TP deployment was found) could only lower a TP step.

`experts_per_rank` / `n_ranks` are the hooks expert parallelism divides by; 1 rank here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.cost.roofline import gemm_compute_efficiency, op_time_s
from sim.inputs.efficiency import Efficiency


@dataclass(frozen=True)
class ExpertShard:
    """What one rank holds of one MoE layer: `experts_per_rank` experts of `elems_per_expert`
    weight elements each (gated: 3 x hidden x width / TP), `width_per_gpu` their TP-split width."""

    experts_per_rank: int
    top_k: int
    elems_per_expert: int
    hidden: int
    width_per_gpu: int
    n_ranks: int = 1
    load_imbalance: float = 1.0


def experts_touched(tokens: np.ndarray, n_experts: int, top_k: int) -> np.ndarray:
    """Expected distinct experts hit by `tokens` tokens choosing top_k of n_experts uniformly."""
    return n_experts * (1.0 - (1.0 - top_k / n_experts) ** np.asarray(tokens, dtype=np.float64))


def routed_experts_cost(tokens: np.ndarray, shard: ExpertShard, weight_bytes_el: float, act_bytes_el: float,
                        peak_flops: float, bandwidth: float, eff: Efficiency):
    """(time_s, flops, bytes, t_compute_s, t_memory_s) of the routed experts for `tokens` tokens per
    step (the rank's share when n_ranks > 1), vectorized over steps."""
    tokens = np.asarray(tokens, dtype=np.float64) / shard.n_ranks
    touched = experts_touched(tokens, shard.experts_per_rank, shard.top_k)
    flops = 2.0 * tokens * shard.top_k * shard.elems_per_expert
    act_bytes = tokens * shard.top_k * (2 * shard.hidden + 3 * shard.width_per_gpu) * act_bytes_el
    bytes_ = touched * shard.elems_per_expert * weight_bytes_el + act_bytes
    tokens_per_expert = np.maximum(tokens * shard.top_k / np.maximum(touched, 1e-300), 1.0)
    e_c = gemm_compute_efficiency(tokens_per_expert, eff, op="experts")
    if shard.n_ranks > 1:
        e_c = e_c / shard.load_imbalance  # the step waits for the busiest rank
    time, t_c, t_m = op_time_s(flops, bytes_, peak_flops, e_c, bandwidth, eff.memory, eff, 3)
    return np.where(tokens > 0, time, 0.0), flops, bytes_, t_c, t_m
