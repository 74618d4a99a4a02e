"""Per-layer ops of models beyond the uniform dense / Mixtral stack: MLA attention projections,
dense-first-k and interleaved MoE layers, shared experts, the router GEMM, and per-group weight
dtypes (an FP8 or MXFP4 checkpoint). `CostModel` uses these when `needs_arch_ops(model, ...)`;
dense models never reach this module (their numbers stay bit for bit).

Layers differ, but the hot path prices "a layer" times n_layers: an op present in only some
layers (the dense MLP of DeepSeek's first 3, the experts and router of the other 58) is priced
at its full cost times its share of the layers, so n_layers x the per-layer sum is the sum over
layers (a breakdown row is that average layer's).

MLA (DeepSeek-V2/V3, Kimi-K2; vLLM's MLA layers): q_a (hidden -> q_lora) and kv_a (hidden ->
kv_lora + rope) are replicated on every TP rank, q_b, kv_b and o split by heads. Decode absorbs
W_UK into the query and W_UV into the output (FlashMLA): the kv_b weights are applied once per
token either way, so kv_b is one GEMM over the step's tokens here; attention then runs over the
cached latent (see `CostModel` attention terms).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.cost.gemm_grid import held_at_roofline_s, measured_table
from sim.cost.moe import ExpertShard, routed_experts_cost
from sim.cost.roofline import gemm_time_s
from sim.inputs.dtypes import bytes_per_element, compute_path
from sim.inputs.model.spec import ModelSpec
from sim.inputs.model.weights import group_dtypes, uniform_dtype


@dataclass(frozen=True)
class GemmDtype:
    bytes_el: float
    peak_flops: float
    eff: object  # sim.inputs.hardware.Efficiency with this dtype's GEMM ceiling
    table_dtype: str = ""  # the measured grid's dtype this GEMM runs as ("" when dequantized: no grid)


def gemm_dtype(hw, dtype: str) -> GemmDtype:
    peak, dequant, eff_key = compute_path(dtype, lambda key: getattr(hw.compute, key, None) is not None)
    return GemmDtype(bytes_per_element(dtype, "--weight-dtype"), hw.peak_flops(peak) / dequant,
                     hw.efficiency.for_weight_dtype(eff_key), dtype if dequant == 1 else "")


def needs_arch_ops(model: ModelSpec, weight_dtype: str) -> bool:
    moe = model.moe
    return (model.mla is not None or uniform_dtype(model, weight_dtype) is None
            or (moe is not None and (moe.expert_intermediate_size is not None or moe.n_shared_experts > 0
                                     or bool(moe.dense_layers))))


def group_gemm_dtypes(model: ModelSpec, hw, weight_dtype: str) -> dict[str, GemmDtype]:
    dtypes = group_dtypes(model, weight_dtype)
    uniform = uniform_dtype(model, weight_dtype)
    if dtypes is None:
        dtypes = dict.fromkeys(("attention", "dense_mlp", "experts", "shared_experts", "router", "embedding"),
                               uniform)
    return {group: gemm_dtype(hw, dtype) for group, dtype in dtypes.items()}


def model_main_dtype(model: ModelSpec, weight_dtype: str) -> str:
    """The dtype of the routed experts (or of the dense MLPs): what the uniform attributes of a
    cost model with per-group dtypes (its efficiency terms) follow."""
    dtypes = group_dtypes(model, weight_dtype) or {}
    return dtypes.get("experts" if model.moe is not None else "dense_mlp", weight_dtype)


def arch_gemm_shapes(cost) -> list[tuple[str, int, int]]:
    """(name, N, K) per GPU of the projections of one layer (the extrapolation report's list)."""
    m = cost.model
    shapes = attention_shapes(cost)
    if m.n_dense_mlp_layers:
        shapes += mlp_shapes(cost, m.intermediate_size)
    if m.n_moe_layers and m.shared_intermediate_size:
        shapes += mlp_shapes(cost, m.shared_intermediate_size, "shared_")
    return shapes


def arch_gemm(cost, tokens, n_out: int, k_in: int, op: str, group: str):
    """(time, flops, bytes, bound) of one GEMM whose weights are in tensor group `group`'s dtype."""
    return _gemm(cost, tokens, n_out, k_in, op, group)


def _gemm(cost, tokens, n_out: int, k_in: int, op: str, group: str):
    g = cost.group_gemm[group]

    def smooth_nk(m, n, k):
        return gemm_time_s(m, n, k, g.bytes_el, cost.act_bytes_el, g.peak_flops, cost.bandwidth, g.eff, op)[0]

    time, flops, bytes_ = gemm_time_s(tokens, n_out, k_in, g.bytes_el, cost.act_bytes_el, g.peak_flops,
                                      cost.bandwidth, g.eff, op)
    table = measured_table(cost, n_out, k_in, g.table_dtype, g.bytes_el, smooth_nk, op)
    if table is not None:
        time = held_at_roofline_s(table.time_at_s(tokens, lambda m: smooth_nk(m, n_out, k_in)), flops, bytes_,
                                  g.peak_flops, cost.bandwidth)
    t_c = flops / g.peak_flops
    bound = np.where(t_c >= bytes_ / cost.bandwidth, "compute", "memory")
    return time * cost.time_scale["gemm"], flops, bytes_, bound


def attention_shapes(cost) -> list[tuple[str, int, int]]:
    """(name, N, K) per GPU of one layer's attention projections."""
    m, heads = cost.model, cost.q_heads_gpu
    h = m.hidden_size
    if m.mla is None:
        return [("qkv_proj", (heads + 2 * cost.kv_heads_gpu) * m.head_dim, h), ("o_proj", h, heads * m.head_dim)]
    a = m.mla
    qk = a.qk_nope_head_dim + a.qk_rope_head_dim
    q = [("q_proj", heads * qk, h)] if a.q_lora_rank is None else [
        ("q_a_proj", a.q_lora_rank, h), ("q_b_proj", heads * qk, a.q_lora_rank)]
    return q + [("kv_a_proj", a.kv_lora_rank + a.qk_rope_head_dim, h),
                ("kv_b_proj", heads * (a.qk_nope_head_dim + a.v_head_dim), a.kv_lora_rank),
                ("o_proj", h, heads * a.v_head_dim)]


def mlp_shapes(cost, width: int, prefix: str = "") -> list[tuple[str, int, int]]:
    m, t = cost.model, cost.tp
    up = (2 if m.mlp == "gated" else 1) * width // t
    return [(f"{prefix}gate_up_proj", up, m.hidden_size), (f"{prefix}down_proj", m.hidden_size, width // t)]


def arch_layer_ops(cost, tokens: np.ndarray) -> list:
    """Per-layer ops (name, time, flops, bytes, bound), each weighted by its share of the layers."""
    m = cost.model
    ops = [(name, *_gemm(cost, tokens, n, k, name, "attention")) for name, n, k in attention_shapes(cost)]
    dense_share = m.n_dense_mlp_layers / m.n_layers
    moe_share = m.n_moe_layers / m.n_layers
    if dense_share:
        for name, n, k in mlp_shapes(cost, m.intermediate_size):
            ops.append(_share(name, _gemm(cost, tokens, n, k, name, "dense_mlp"), dense_share))
    if moe_share:
        router = _gemm(cost, tokens, m.n_experts, m.hidden_size, "router", "router")
        ops.append(_share("router", router, moe_share))
        ops.append(_share("moe_mlp", _routed(cost, tokens), moe_share))
        if m.shared_intermediate_size:
            for name, n, k in mlp_shapes(cost, m.shared_intermediate_size, "shared_"):
                ops.append(_share(name, _gemm(cost, tokens, n, k, name, "shared_experts"), moe_share))
    return ops


def _routed(cost, tokens):
    m, g = cost.model, cost.group_gemm["experts"]
    shard = ExpertShard(experts_per_rank=m.n_experts, top_k=m.n_active_experts,
                        elems_per_expert=m.expert_params // cost.tp, hidden=m.hidden_size,
                        width_per_gpu=m.expert_intermediate_size // cost.tp, load_imbalance=m.moe.load_imbalance)
    time, flops, bytes_, t_c, t_m = routed_experts_cost(tokens, shard, g.bytes_el, cost.act_bytes_el, g.peak_flops,
                                                        cost.bandwidth, g.eff)
    bound = np.where(t_c >= t_m, "compute", "memory")
    return time * cost.time_scale["gemm"], flops, bytes_, bound


def _share(name: str, op: tuple, share: float) -> tuple:
    time, flops, bytes_, bound = op
    if share == 1:
        return name, time, flops, bytes_, bound
    return name, time * share, flops * share, bytes_ * share, bound
