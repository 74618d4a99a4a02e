"""Parameter counts of a `ModelSpec`: whole model, per token, and per GPU by tensor group.

Counts are of the weight matrices (norm weights and biases are left out: < 0.05 % of any bundled
model). Tensor groups are `spec.WEIGHT_GROUPS`; their dtypes come from `ModelSpec.weight_dtypes`.

Sharding under tensor parallelism t (as vLLM loads them): attention q/o and, for GQA, k/v split
by heads (k/v replicate once t exceeds the KV heads); MLA's down-projections (q_a, kv_a) are
replicated and its up-projections (q_b, kv_b) and o split by heads; every expert and the dense
MLPs split along their intermediate width; the router is replicated; embeddings and the LM head
split along the vocabulary. `ep` (expert parallelism, a later layout) divides the routed experts
among ranks instead of their width; 1 here.
"""

from __future__ import annotations

import math

from sim.inputs.model.spec import ModelSpec


def attention_params(m: ModelSpec, tp: int = 1) -> int:
    """Projection weights of one attention layer held by one of `tp` GPUs (tp=1: the whole layer)."""
    h, heads = m.hidden_size, m.n_heads // tp
    if m.mla is None:
        d, kv = m.head_dim, (m.n_kv_heads if tp == 1 else m.kv_heads_per_gpu(tp))
        return h * (heads + 2 * kv) * d + heads * d * h
    a = m.mla
    qk_dim = a.qk_nope_head_dim + a.qk_rope_head_dim
    q = h * heads * qk_dim if a.q_lora_rank is None else h * a.q_lora_rank + a.q_lora_rank * heads * qk_dim
    kv_down = h * (a.kv_lora_rank + a.qk_rope_head_dim)
    kv_up = a.kv_lora_rank * heads * (a.qk_nope_head_dim + a.v_head_dim)
    return q + kv_down + kv_up + heads * a.v_head_dim * h


def dense_mlp_params(m: ModelSpec) -> int:
    return m.mlp_matrices * m.hidden_size * m.intermediate_size


def shared_expert_params(m: ModelSpec) -> int:
    return m.mlp_matrices * m.hidden_size * m.shared_intermediate_size


def router_params(m: ModelSpec) -> int:
    return m.hidden_size * m.n_experts if m.moe else 0


def layer_params(m: ModelSpec, moe_layer: bool) -> int:
    if not moe_layer:
        return attention_params(m) + dense_mlp_params(m)
    return attention_params(m) + m.n_experts * m.expert_params + router_params(m) + shared_expert_params(m)


def total_params(m: ModelSpec) -> int:
    """Decoder layers + embeddings (+ LM head when untied). MTP layers and `extra_weight_params`
    are apart (`mtp_params`, the memory planner)."""
    return (m.n_dense_mlp_layers * layer_params(m, False) + m.n_moe_layers * layer_params(m, True)
            + m.embedding_params)


def active_params(m: ModelSpec) -> int:
    """Weights one token is multiplied by: attention, its top-k experts, the shared experts."""
    moe_layer = attention_params(m) + m.n_active_experts * m.expert_params + shared_expert_params(m)
    dense_layer = attention_params(m) + (m.expert_params if m.moe is None else dense_mlp_params(m))
    return m.n_dense_mlp_layers * dense_layer + m.n_moe_layers * moe_layer + m.embedding_params


def mtp_params(m: ModelSpec) -> int:
    """One MTP module per next-n layer: a decoder layer like the last one, the projection of
    [embedding; hidden] back to hidden (2h x h); embeddings and head shared with the model."""
    if not m.mtp_layers:
        return 0
    return m.mtp_layers * (layer_params(m, m.is_moe_layer(m.n_layers - 1)) + 2 * m.hidden_size ** 2)


def weight_elements_by_group(m: ModelSpec, tp: int, ep: int = 1, with_mtp: bool = False) -> dict[str, int]:
    """Weight elements one GPU of a TP group holds, per tensor group (`spec.WEIGHT_GROUPS`).
    Sums to the legacy per-GPU count for models without per-group dtypes, bit for bit."""
    layers = m.n_layers + (m.mtp_layers if with_mtp else 0)
    n_moe = m.n_moe_layers + (m.mtp_layers if with_mtp and m.is_moe_layer(m.n_layers - 1) else 0)
    n_dense = layers - n_moe
    out = {"attention": layers * attention_params(m, tp), "embedding": math.ceil(m.embedding_params / tp)}
    if m.moe is None:
        out["dense_mlp"] = n_dense * (m.expert_params // tp)
        return out
    out["dense_mlp"] = n_dense * (dense_mlp_params(m) // tp)
    out["experts"] = n_moe * (m.n_experts // ep) * m.expert_params // tp
    out["router"] = n_moe * router_params(m)
    out["shared_experts"] = n_moe * (shared_expert_params(m) // tp)
    if with_mtp and m.mtp_layers:
        out["attention"] += m.mtp_layers * 2 * m.hidden_size ** 2 // tp  # eh_proj, counted with attention
    return out
