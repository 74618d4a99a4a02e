"""`ModelSpec`: one architecture as the cost model and memory planner see it.

A model is a stack of decoder layers, each with an attention kind and an MLP kind, plus the
embeddings, the LM head and optional MTP (next-n) layers. The flat fields below describe the
common case (every layer alike, as the Llama-family YAMLs say); the optional ones describe how
layers differ, and `layer_groups()` turns them into the list of (count, attention, MLP) groups
that memory and cost sum over:

- `mla`: multi-head latent attention (DeepSeek-V2/V3, Kimi-K2) in every layer.
- `layer_attention` + `window_tokens`: per layer `full`, `sliding` (the last W tokens; gpt-oss,
  Mistral) or `chunked` (the current W-token chunk; Llama-4's local layers).
- `moe.dense_layers`: the layers whose MLP is dense (DeepSeek's first-k, Llama-4 Maverick's
  interleaving, Qwen3-MoE's `mlp_only_layers`); the rest route to experts.
- `weight_dtypes`: the checkpoint's dtype per tensor group (from `quantization_config`), see
  `sim/inputs/dtypes.py`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, NonNegativeInt, model_validator

from sim.errors import InputError
from sim.schema import Plausible, StrictModel

AttentionKind = Literal["full", "sliding", "chunked"]
WEIGHT_GROUPS = ("attention", "dense_mlp", "experts", "shared_experts", "router", "embedding")  # embedding: + LM head


class MoE(StrictModel):
    """Routed experts (top-k of n per token) and the experts every token goes through."""

    n_experts: Plausible("experts", int)
    experts_per_token: Plausible("experts", int)
    expert_intermediate_size: Plausible("ffn_width", int) | None = None  # None: the model's intermediate_size (Mixtral)
    n_shared_experts: Plausible("shared_experts", int) = 0
    # width of ONE shared expert; None: the expert width
    shared_intermediate_size: Plausible("ffn_width", int) | None = None
    dense_layers: list[NonNegativeInt] = []  # layers whose MLP is dense (intermediate_size wide)
    # max / mean tokens per expert of a step (1: balanced). A measured term: see docs/models.md.
    load_imbalance: float = Field(1.0, ge=1.0)

    @model_validator(mode="after")
    def _top_k_within_experts(self) -> MoE:
        if self.experts_per_token > self.n_experts:
            raise ValueError(f"experts_per_token ({self.experts_per_token}) must not exceed "
                             f"n_experts ({self.n_experts})")
        if len(set(self.dense_layers)) != len(self.dense_layers):
            raise ValueError("dense_layers must not repeat a layer")
        return self


class MLA(StrictModel):
    """Multi-head latent attention: K and V are rebuilt from a kv_lora_rank latent that is cached
    with one shared qk_rope_head_dim-wide RoPE key per token."""

    q_lora_rank: Plausible("lora_rank", int) | None  # None: q is projected directly from the hidden state (V2-Lite)
    kv_lora_rank: Plausible("lora_rank", int)
    qk_nope_head_dim: Plausible("head_dim", int)
    qk_rope_head_dim: Plausible("head_dim", int)
    v_head_dim: Plausible("head_dim", int)


class ModelSpec(StrictModel):
    """An architecture. Relations checked: n_heads is a multiple of n_kv_heads (GQA groups are whole)."""

    name: str
    hf_name: str = ""
    n_layers: Plausible("layers", int)
    hidden_size: Plausible("hidden_size", int)
    n_heads: Plausible("heads", int)
    n_kv_heads: Plausible("heads", int)
    head_dim: Plausible("head_dim", int)
    intermediate_size: Plausible("ffn_width", int)
    vocab_size: Plausible("vocab", int)
    max_position_embeddings: Plausible("context_tokens", int)
    mlp: Literal["gated", "plain"] = "gated"
    tie_word_embeddings: bool = False
    qkv_bias: bool = False
    moe: MoE | None = None
    mla: MLA | None = None
    layer_attention: list[AttentionKind] | None = None  # None: every layer full attention
    window_tokens: Plausible("context_tokens", int) | None = None  # W of the sliding / chunked layers
    attention_sinks: bool = False  # a learned per-head logit (gpt-oss): no KV, negligible FLOPs
    mtp_layers: Plausible("extra_layers", int) = 0  # next-n prediction layers (DeepSeek-V3 MTP), loaded for speculation
    weight_dtypes: dict[str, str] | None = None  # checkpoint dtype per WEIGHT_GROUPS entry
    # weights loaded but not in the text decoder (a vision tower)
    extra_weight_params: Plausible("extra_params", int) = 0
    provenance: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> ModelSpec:
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads ({self.n_heads}) must be a multiple of n_kv_heads ({self.n_kv_heads})")
        if self.layer_attention is not None:
            if len(self.layer_attention) != self.n_layers:
                raise ValueError(f"layer_attention lists {len(self.layer_attention)} layers; "
                                 f"n_layers is {self.n_layers}")
            if any(kind != "full" for kind in self.layer_attention) and self.window_tokens is None:
                raise ValueError("window_tokens is required when layer_attention has sliding or chunked layers")
            if self.mla is not None and any(kind != "full" for kind in self.layer_attention):
                raise ValueError("mla with sliding or chunked layers is not modelled")
            if {"sliding", "chunked"} <= set(self.layer_attention):
                raise ValueError("layer_attention mixing sliding and chunked layers is not modelled "
                                 "(one window_tokens, one windowed kind)")
        if self.moe is not None and any(i >= self.n_layers for i in self.moe.dense_layers):
            raise ValueError(f"moe.dense_layers must be layer indices below n_layers ({self.n_layers})")
        unknown = sorted(set(self.weight_dtypes or {}) - set(WEIGHT_GROUPS))
        if unknown:
            raise ValueError(f"weight_dtypes: unknown group {unknown[0]!r}; groups: {', '.join(WEIGHT_GROUPS)}")
        return self

    # ---- the layer stack ----
    def attention_kind(self, layer: int) -> AttentionKind:
        return "full" if self.layer_attention is None else self.layer_attention[layer]

    def is_moe_layer(self, layer: int) -> bool:
        return self.moe is not None and layer not in self.moe.dense_layers

    @property
    def n_moe_layers(self) -> int:
        return 0 if self.moe is None else self.n_layers - len(self.moe.dense_layers)

    @property
    def n_dense_mlp_layers(self) -> int:
        return self.n_layers - self.n_moe_layers

    def n_layers_of(self, kind: AttentionKind) -> int:
        return sum(1 for i in range(self.n_layers) if self.attention_kind(i) == kind)

    @property
    def is_hybrid_attention(self) -> bool:
        """Some layers attend over a bounded window (sliding or chunked)."""
        return self.layer_attention is not None and any(kind != "full" for kind in self.layer_attention)

    @property
    def attention_label(self) -> str:
        if self.mla is not None:
            return f"MLA (latent {self.mla.kv_lora_rank} + rope {self.mla.qk_rope_head_dim})"
        if not self.is_hybrid_attention:
            return "full (MHA)" if self.n_kv_heads == self.n_heads else "full (GQA)"
        parts = [f"{self.n_layers_of(k)} {k}" for k in ("full", "sliding", "chunked") if self.n_layers_of(k)]
        return " + ".join(parts) + f" (W={self.window_tokens})" + (" + sinks" if self.attention_sinks else "")

    def layer_groups(self) -> list[dict]:
        """Runs of consecutive layers alike: [{first, n_layers, attention, mlp}], in layer order."""
        groups: list[dict] = []
        for i in range(self.n_layers):
            key = (self.attention_kind(i), "moe" if self.is_moe_layer(i) else "dense")
            if groups and (groups[-1]["attention"], groups[-1]["mlp"]) == key:
                groups[-1]["n_layers"] += 1
            else:
                groups.append({"first": i, "n_layers": 1, "attention": key[0], "mlp": key[1]})
        return groups

    # ---- derived quantities (element counts; multiply by a dtype's bytes); see sim/inputs/model/params.py ----
    @property
    def mlp_matrices(self) -> int:
        return 3 if self.mlp == "gated" else 2

    @property
    def expert_intermediate_size(self) -> int:
        """Width of one routed expert (the dense width when the config names no other)."""
        if self.moe is None or self.moe.expert_intermediate_size is None:
            return self.intermediate_size
        return self.moe.expert_intermediate_size

    @property
    def shared_intermediate_size(self) -> int:
        """Total width of the shared experts of one MoE layer (0 without)."""
        if self.moe is None or not self.moe.n_shared_experts:
            return 0
        one = self.moe.shared_intermediate_size or self.expert_intermediate_size
        return self.moe.n_shared_experts * one

    @property
    def expert_params(self) -> int:
        """Parameters of one MLP (one routed expert for MoE)."""
        return self.mlp_matrices * self.hidden_size * self.expert_intermediate_size

    @property
    def n_experts(self) -> int:
        return self.moe.n_experts if self.moe else 1

    @property
    def n_active_experts(self) -> int:
        return self.moe.experts_per_token if self.moe else 1

    @property
    def embedding_params(self) -> int:
        tables = 1 if self.tie_word_embeddings else 2
        return tables * self.vocab_size * self.hidden_size

    def check_tp(self, tp: int) -> None:
        """Tensor parallelism must split the heads evenly (KV heads may replicate when tp > kv)."""
        if tp < 1 or self.n_heads % tp:
            raise InputError("--tp", None, f"must divide n_heads={self.n_heads} of {self.name}")
        if self.mla is not None:
            return  # one latent per token, replicated on every rank
        if (tp > self.n_kv_heads and tp % self.n_kv_heads) or (tp < self.n_kv_heads and self.n_kv_heads % tp):
            raise InputError("--tp", None, f"must divide or be a multiple of n_kv_heads={self.n_kv_heads}")

    def kv_heads_per_gpu(self, tp: int) -> int:
        """KV heads each GPU stores: heads are split, or replicated once tp exceeds them (MLA: the
        latent is one 'head' every rank holds whole)."""
        if self.mla is not None:
            return 1
        return max(1, self.n_kv_heads // tp)
