"""Every kernel shape one shard of a model runs: dense, MoE and MLA layers.

`model_gemm_shapes` lists the plain GEMMs (the names `sim/cost/arch.py` prices them under):
- attention: GQA `qkv_proj`, `o_proj`; MLA `q_a_proj` (hidden -> q_lora_rank, replicated on
  every TP rank), `q_b_proj` (-> heads x (nope + rope), split by heads; `q_proj` straight from
  the hidden state when q_lora_rank is None), `kv_a_proj` (hidden -> kv_lora_rank + rope,
  replicated), `kv_b_proj` (kv_lora_rank -> heads x (nope + v)), `o_proj`;
- MLP: `gate_up_proj`, `down_proj` for dense models and the dense layers of a MoE model; for
  MoE layers the `router` (hidden -> n_experts, replicated) and `shared_gate_up_proj`,
  `shared_down_proj` when the model has shared experts;
- `lm_head`.
A dense GQA model gives exactly `kernels.shapes.shapes_for`.

`expert_groups` lists the routed experts' grouped GEMMs per layout: experts split by TP
(every rank holds every expert, width / tp) or expert-parallel over the TP group (EP = tp:
n_experts / ep whole experts per rank), as vLLM's `--enable-expert-parallel` lays them out.
`ExpertGroup.at(m_tokens)` gives, for M tokens on the rank, the experts that receive rows and
the rows each: M x top_k rows arrive (balanced routing), M x top_k x ep / n_experts per expert.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kernels.shapes import AttentionHeads, GemmShape, ModelDims, attention_heads, shapes_for


@dataclass(frozen=True)
class ExpertGroup:
    """One grouped expert GEMM on one rank: each active expert runs [rows, k_in] x [k_in, n_out]."""

    op: str  # experts_gate_up or experts_down
    n_out: int
    k_in: int
    n_local_experts: int
    top_k: int
    ep: int

    def at(self, m_tokens: int) -> tuple[int, int]:
        """(experts with rows, rows per such expert) for `m_tokens` tokens on this rank."""
        rows_on_rank = m_tokens * self.top_k
        n_active = min(self.n_local_experts, rows_on_rank)
        return n_active, math.ceil(rows_on_rank / n_active)


@dataclass(frozen=True)
class LatentHeads:
    """MLA decode on one shard, absorbed: q heads over one latent row of latent + rope dims."""

    n_heads: int
    latent_dim: int
    rope_dim: int
    qk_head_dim: int  # nope + rope: the softmax scale is its inverse square root


def _attention_gemms(dims: ModelDims, tp: int) -> list[GemmShape]:
    a, heads = dims.mla, dims.n_heads // tp
    qk = a.qk_nope_head_dim + a.qk_rope_head_dim
    q = [GemmShape("q_proj", heads * qk, dims.hidden)] if a.q_lora_rank is None else [
        GemmShape("q_a_proj", a.q_lora_rank, dims.hidden), GemmShape("q_b_proj", heads * qk, a.q_lora_rank)]
    return q + [GemmShape("kv_a_proj", a.kv_lora_rank + a.qk_rope_head_dim, dims.hidden),
                GemmShape("kv_b_proj", heads * (a.qk_nope_head_dim + a.v_head_dim), a.kv_lora_rank),
                GemmShape("o_proj", dims.hidden, heads * a.v_head_dim)]


def _mlp(width: int, dims: ModelDims, tp: int, prefix: str = "") -> list[GemmShape]:
    up = (2 if dims.gated else 1) * width // tp
    return [GemmShape(f"{prefix}gate_up_proj", up, dims.hidden),
            GemmShape(f"{prefix}down_proj", dims.hidden, width // tp)]


def model_gemm_shapes(dims: ModelDims, tp: int) -> list[GemmShape]:
    """The plain GEMMs of one shard at TP `tp` (see the module docstring); raises `InputError`
    when `tp` does not split the model."""
    dense = shapes_for(dims, tp)  # checks tp; qkv, o, gate_up, down, lm_head
    if dims.moe is None and dims.mla is None:
        return dense
    by_op = {shape.op: shape for shape in dense}
    shapes = _attention_gemms(dims, tp) if dims.mla is not None else [by_op["qkv_proj"], by_op["o_proj"]]
    moe = dims.moe
    if moe is None or moe.has_dense_layers:
        shapes += _mlp(dims.intermediate, dims, tp)
    if moe is not None:
        shapes.append(GemmShape("router", moe.n_experts, dims.hidden))
        if moe.shared_intermediate:
            shapes += _mlp(moe.shared_intermediate, dims, tp, "shared_")
    return shapes + [by_op["lm_head"]]


def expert_groups(dims: ModelDims, tp: int) -> list[ExpertGroup]:
    """Grouped expert GEMMs of one rank, TP-split (ep 1) and, when tp > 1 divides the expert
    count, expert-parallel (ep = tp); [] for a dense model."""
    moe = dims.moe
    if moe is None:
        return []
    n_up = 2 if dims.gated else 1
    layouts = [(1, tp)] + ([(tp, 1)] if tp > 1 and moe.n_experts % tp == 0 else [])
    groups = []
    for ep, width_split in layouts:
        width, n_local = moe.expert_intermediate // width_split, moe.n_experts // ep
        groups += [ExpertGroup("experts_gate_up", n_up * width, dims.hidden, n_local, moe.top_k, ep),
                   ExpertGroup("experts_down", dims.hidden, width, n_local, moe.top_k, ep)]
    return groups


def prefill_heads(dims: ModelDims, tp: int) -> AttentionHeads:
    """Heads prefill attention runs on one shard. MLA prefill is multi-head attention over
    up-projected K and V (every head its own KV) at the qk head dim (nope + rope); V, narrower,
    is zero-padded to it, as vLLM's MLA backends do for FlashAttention."""
    if dims.mla is None:
        return attention_heads(dims, tp)
    a = dims.mla
    heads = attention_heads(dims, tp).n_heads
    return AttentionHeads(heads, heads, a.qk_nope_head_dim + a.qk_rope_head_dim)


def decode_heads(dims: ModelDims, tp: int) -> AttentionHeads | LatentHeads:
    """Heads decode attention runs on one shard: GQA heads, or MLA's absorbed latent form."""
    if dims.mla is None:
        return attention_heads(dims, tp)
    a = dims.mla
    return LatentHeads(attention_heads(dims, tp).n_heads, a.kv_lora_rank, a.qk_rope_head_dim,
                       a.qk_nope_head_dim + a.qk_rope_head_dim)
