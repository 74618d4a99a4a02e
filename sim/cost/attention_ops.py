"""Attention ops of one layer (`CostModel.breakdown`): prefill and decode attention over the paged
KV cache, and the windowed layers' share of hybrid-attention models. Each op is (name, time,
flops, bytes, bound), vectorized over steps."""

from __future__ import annotations

import numpy as np

from sim.cost.roofline import op_time_s
from sim.cost.shapes import AttentionLoad
from sim.cost.step_cost import op_bound
from sim.cost.views import CostModelView
from sim.cost.window import window_sums


def attention_ops(cost: CostModelView, load: AttentionLoad, share: float | None = None, suffix: str = ""):
    """Prefill and decode attention of one layer, vectorized over steps. Both read the paged KV
    cache, so both stream it at the paged-attention efficiency of the block size. `share`:
    the layers' share these ops stand for (hybrid attention: full vs windowed layers)."""
    d, qh = cost.model.head_dim, cost.q_heads_gpu
    if share is None and cost.window is not None:
        share = cost.full_attention_share
    out = []
    kinds = (
        ("prefill_attention", load.prefill_pairs, load.prefill_kv_tokens, load.prefill_tokens, cost._paged_eff),
        ("decode_attention", load.decode_context, load.decode_kv_tokens, load.decode_tokens, cost._paged_eff),
    )
    for name, pairs, kv_tokens, n_tokens, e_mem in kinds:
        flops = cost.pair_flops[name] * np.asarray(pairs, dtype=np.float64)
        bytes_ = kv_tokens * cost.kv_bytes_per_token_layer_gpu + 2.0 * n_tokens * qh * d * cost.act_bytes_el
        kernels = 1
        if share is not None:
            flops, bytes_, kernels = flops * share, bytes_ * share, share
        time, t_c, t_m = op_time_s(
            flops, bytes_, cost.attn_peak_flops, cost.eff.attention_compute, cost.bandwidth, e_mem, cost.eff,
            kernels)
        ratio = cost.prefill_ratio if name == "prefill_attention" else cost.decode_ratio
        if ratio is not None:
            time = time * ratio.factor(np.asarray(pairs, dtype=np.float64) if name == "prefill_attention"
                                       else np.asarray(kv_tokens, dtype=np.float64))
        out.append((name + suffix, np.where(n_tokens > 0, time, 0.0), flops, bytes_, op_bound(t_c, t_m)))
    return out


def window_ops(cost: CostModelView, q: np.ndarray, c: np.ndarray):
    """The windowed layers' attention (none without them): keys and KV bounded by the window."""
    if cost.window is None:
        return []
    pairs_p, kv_p, pairs_d, kv_d = window_sums(q, c, cost.window)
    load = AttentionLoad(np.array([pairs_p]), np.array([kv_p]), np.array([float(q[q > 1].sum())]),
                         np.array([pairs_d]), np.array([kv_d]), np.array([float((q == 1).sum())]))
    return attention_ops(cost, load, 1.0 - cost.full_attention_share, " (windowed layers)")
