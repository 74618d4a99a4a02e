"""Per-layer ops of the uniform dense / Mixtral stack beyond its dense GEMMs (`CostModel._layer_ops`):
the expert MLPs of a MoE layer and the elementwise streams. Each returns (name, time, flops, bytes,
bound), vectorized over steps' token counts."""

from __future__ import annotations

import numpy as np

from sim.cost.roofline import op_time_s
from sim.cost.step_cost import op_bound
from sim.cost.views import CostModelView


def moe_op(cost: CostModelView, tokens: np.ndarray):
    """Expert MLPs: FLOPs follow the active experts; bytes follow the distinct experts touched."""
    m, t = cost.model, cost.tp
    n_exp, k = m.moe.n_experts, m.moe.experts_per_token
    expert_elems = m.expert_params // t
    experts_touched = n_exp * (1.0 - (1.0 - k / n_exp) ** tokens)
    flops = 2.0 * tokens * k * expert_elems
    act_bytes = tokens * k * (m.hidden_size * 2 + m.intermediate_size * 3 // t) * cost.act_bytes_el
    bytes_ = experts_touched * expert_elems * cost.weight_bytes_el + act_bytes
    tokens_per_expert = np.maximum(tokens * k / n_exp, 1.0)
    e_c = cost.eff.gemm_compute_max * tokens_per_expert / (tokens_per_expert + cost.eff.gemm_half_tokens)
    time, t_c, t_m = op_time_s(flops, bytes_, cost.peak_flops, e_c, cost.bandwidth, cost.eff.memory, cost.eff, 3)
    time = time * cost.time_scale["gemm"]
    return ("moe_mlp", np.where(tokens > 0, time, 0.0), flops, bytes_, op_bound(t_c, t_m))


def elementwise_op(cost: CostModelView, tokens: np.ndarray):
    """Norms, rotary, activation, residual adds: memory-bound streams over activations."""
    m, t = cost.model, cost.tp
    width = (
        4 * m.hidden_size  # two norms, read + write
        + 2 * (cost.q_heads_gpu + cost.kv_heads_gpu) * m.head_dim  # rotary on q and k
        + m.mlp_matrices * m.intermediate_size // t  # activation (and gating)
        + 6 * m.hidden_size  # two residual adds, two reads + a write each
    )
    bytes_ = tokens * width * cost.act_bytes_el
    e_mem = cost.eff.elementwise_memory or cost.eff.memory
    fixed_us = cost.eff.elementwise_fixed_us
    n_launches = 5 if fixed_us is None else 0
    time, _, _ = op_time_s(0.0, bytes_, cost.peak_flops, 1.0, cost.bandwidth, e_mem, cost.eff, n_launches)
    time = time + (fixed_us or 0.0) * 1e-6
    time = time * cost.time_scale["elementwise"]
    return ("elementwise", np.where(tokens > 0, time, 0.0), np.zeros_like(tokens), bytes_,
            np.full(tokens.shape, "memory"))
