"""A model's projection GEMM shapes on one tensor-parallel shard.

Megatron-style sharding (as vLLM does it): QKV, gate+up and the LM head are split by
output columns, O and down by input rows, so every shard runs `x[M, k_in] @ W[k_in, n_out]`
with the per-shard `n_out`, `k_in` returned here. When there are fewer KV heads than
shards, each shard keeps one replicated KV head.

Plain ints in, so this works before (and without) `sim.inputs.model`; `dims_from_spec` reads
them from any object with `ModelSpec`'s attribute names.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.errors import InputError

GEMM_OPS = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj", "lm_head")


@dataclass(frozen=True)
class MoeDims:
    """Routed experts of a MoE layer (`sim.inputs.model.MoE`'s numbers, widths resolved)."""

    n_experts: int
    top_k: int
    expert_intermediate: int  # width of one routed expert
    shared_intermediate: int = 0  # total width of the shared experts (0: none)
    has_dense_layers: bool = False  # some layers keep a dense MLP (DeepSeek's first 3)


@dataclass(frozen=True)
class MlaDims:
    """Multi-head latent attention (`sim.inputs.model.MLA`)."""

    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


@dataclass(frozen=True)
class ModelDims:
    """The architecture numbers the projection shapes depend on (whole model, unsharded)."""

    hidden: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    gated: bool = True
    moe: MoeDims | None = None
    mla: MlaDims | None = None


@dataclass(frozen=True)
class GemmShape:
    """One projection on one shard: `op` multiplies [M, k_in] by [k_in, n_out]."""

    op: str
    n_out: int
    k_in: int


@dataclass(frozen=True)
class AttentionHeads:
    """Attention heads that one shard owns."""

    n_heads: int
    n_kv_heads: int
    head_dim: int


# A toy model for CPU quick runs: small enough that a full quick grid takes seconds.
TOY_DIMS = ModelDims(
    hidden=256, n_heads=4, n_kv_heads=2, head_dim=64, intermediate=512, vocab=2048, gated=True
)


def _field(obj, name: str, default=None):
    """`obj.name` or `obj[name]` (a spec read as plain YAML has dicts for `moe` and `mla`)."""
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _moe_dims(spec: object) -> MoeDims | None:
    moe = _field(spec, "moe")
    if moe is None:
        return None
    width = _field(moe, "expert_intermediate_size") or int(spec.intermediate_size)
    n_shared = _field(moe, "n_shared_experts", 0) or 0
    shared = n_shared * (_field(moe, "shared_intermediate_size") or width)
    return MoeDims(int(_field(moe, "n_experts")), int(_field(moe, "experts_per_token")), int(width),
                   int(shared), bool(_field(moe, "dense_layers", []) or []))  # fmt: skip


def _mla_dims(spec: object) -> MlaDims | None:
    mla = _field(spec, "mla")
    if mla is None:
        return None
    names = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
    return MlaDims(*(None if _field(mla, n) is None else int(_field(mla, n)) for n in names))


def dims_from_spec(spec: object) -> ModelDims:
    """Read `ModelDims` from an object with `sim.inputs.model.ModelSpec`'s attribute names (or a
    namespace of its YAML keys, where `moe` and `mla` are dicts).

    A `ModelDims` passes through unchanged. `mlp` other than "plain" counts as gated.
    """
    if isinstance(spec, ModelDims):
        return spec
    return ModelDims(
        hidden=int(spec.hidden_size),
        n_heads=int(spec.n_heads),
        n_kv_heads=int(spec.n_kv_heads),
        head_dim=int(spec.head_dim),
        intermediate=int(spec.intermediate_size),
        vocab=int(spec.vocab_size),
        gated=getattr(spec, "mlp", "gated") != "plain",
        moe=_moe_dims(spec),
        mla=_mla_dims(spec),
    )


def shardable(dims: ModelDims, tp: int) -> bool:
    """True when `tp` shards split this model's heads, MLP and expert widths evenly."""
    if tp < 1 or dims.n_heads % tp or dims.intermediate % tp:
        return False
    if dims.moe is not None and (dims.moe.expert_intermediate % tp or dims.moe.shared_intermediate % tp):
        return False
    return dims.n_kv_heads % tp == 0 or tp % dims.n_kv_heads == 0


def _check_shardable(dims: ModelDims, tp: int) -> None:
    if not shardable(dims, tp):
        allowed = (
            f"a tensor-parallel size >= 1 dividing n_heads={dims.n_heads} and "
            f"intermediate={dims.intermediate}, and dividing or divisible by "
            f"n_kv_heads={dims.n_kv_heads}"
        )
        raise InputError("tp", str(tp), allowed)


def attention_heads(dims: ModelDims, tp: int) -> AttentionHeads:
    """Heads on one shard; KV heads are replicated (one per shard) when tp > n_kv_heads."""
    _check_shardable(dims, tp)
    return AttentionHeads(
        n_heads=dims.n_heads // tp,
        n_kv_heads=max(1, dims.n_kv_heads // tp),
        head_dim=dims.head_dim,
    )


def projection_shapes(
    hidden: int,
    n_heads: int,
    n_kv_heads: int,
    head_dim: int,
    intermediate: int,
    vocab: int,
    tp: int = 1,
    gated: bool = True,
) -> list[GemmShape]:
    """The five projection GEMMs of one decoder layer (plus the LM head) on one shard.

    Returns shapes in `GEMM_OPS` order. The LM head splits the vocabulary, rounding up
    (the last shard is padded). Raises `InputError` when `tp` does not split the model.
    """
    dims = ModelDims(hidden, n_heads, n_kv_heads, head_dim, intermediate, vocab, gated)
    heads = attention_heads(dims, tp)
    n_mlp_up = 2 if gated else 1
    return [
        GemmShape("qkv_proj", (heads.n_heads + 2 * heads.n_kv_heads) * head_dim, hidden),
        GemmShape("o_proj", hidden, heads.n_heads * head_dim),
        GemmShape("gate_up_proj", n_mlp_up * intermediate // tp, hidden),
        GemmShape("down_proj", hidden, intermediate // tp),
        GemmShape("lm_head", -(-vocab // tp), hidden),
    ]


def shapes_for(dims: ModelDims, tp: int) -> list[GemmShape]:
    """`projection_shapes` for a `ModelDims`."""
    return projection_shapes(
        dims.hidden,
        dims.n_heads,
        dims.n_kv_heads,
        dims.head_dim,
        dims.intermediate,
        dims.vocab,
        tp,
        dims.gated,
    )
