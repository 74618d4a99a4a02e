"""Llama-4 (Scout, Maverick): a `text_config` decoder plus a vision tower.

Text: GQA; layers that use RoPE (`no_rope_layers[i] == 1`; transformers' default when absent or
empty: all but every `no_rope_layer_interval`-th, 4) attend within their `attention_chunk_size`
chunk (vLLM's ChunkedLocalAttention), the NoPE layers over the whole context. MoE layers (`moe_layers`, default every
`interleave_moe_layer_step`-th from step - 1) hold `num_local_experts` routed experts of width
`intermediate_size` (top `num_experts_per_tok`) and one shared expert of the same width; the
other layers a dense MLP of width `intermediate_size_mlp`.

Vision tower: its weights are loaded (counted in `extra_weight_params`: per encoder layer
4 h^2 + 2 h i, plus the projector vision_output_dim x text hidden; norms, patch embedding and
adapter left out), image tokens are not modelled (text-only serving)."""

from __future__ import annotations

from sim.inputs.model.hf.common import HFConfig, base_fields
from sim.inputs.model.hf.quant import weight_dtypes
from sim.schema import MAX_TOKENS

MODEL_TYPES = ("llama4",)


def read(cfg: HFConfig, model_type: str) -> dict:
    raw = cfg.raw("text_config")
    if not isinstance(raw, dict):
        raise cfg.error("text_config", "required mapping (the Llama-4 text decoder's config)")
    text = HFConfig(raw, cfg.path, prefix="text_config.")
    spec = read_text(text)
    text.refuse_unread("llama4_text")
    spec["extra_weight_params"] = _vision_params(cfg, raw["hidden_size"])
    spec["weight_dtypes"] = weight_dtypes(cfg) or weight_dtypes(text)
    return spec


def read_text(cfg: HFConfig) -> dict:
    spec = base_fields(cfg)
    n = spec["n_layers"]
    spec["max_position_embeddings"] = min(spec["max_position_embeddings"], MAX_TOKENS)
    uses_rope = _rope_layers(cfg, n)
    chunk = cfg.opt_int("attention_chunk_size")
    if chunk is not None:
        spec["layer_attention"] = ["chunked" if rope else "full" for rope in uses_rope]
        spec["window_tokens"] = chunk
    step = cfg.int("interleave_moe_layer_step", 1)
    moe_layers = cfg.int_list("moe_layers") or list(range(step - 1, n, step))
    if any(i >= n for i in moe_layers):
        raise cfg.error("moe_layers", f"layer indices must be below num_hidden_layers ({n})")
    width = cfg.int("intermediate_size")
    spec["intermediate_size"] = cfg.int("intermediate_size_mlp", width)
    spec["moe"] = {
        "n_experts": cfg.int("num_local_experts"), "experts_per_token": cfg.int("num_experts_per_tok"),
        "expert_intermediate_size": width, "n_shared_experts": 1,
        "dense_layers": [i for i in range(n) if i not in set(moe_layers)],
    }
    return spec


def _rope_layers(cfg: HFConfig, n: int) -> list:
    """1 where a layer uses RoPE. An absent or empty `no_rope_layers` means transformers' default
    (Llama4TextConfig): a NoPE layer every `no_rope_layer_interval` (4) layers; RedHatAI's re-save of
    Scout-Instruct writes `[]`."""
    interval = cfg.int("no_rope_layer_interval", 4)
    if not cfg.raw("no_rope_layers"):
        return [int((i + 1) % interval != 0) for i in range(n)]
    return cfg.int_list("no_rope_layers", n, allowed=(0, 1))


def _vision_params(cfg: HFConfig, text_hidden: int) -> int:
    if not cfg.has("vision_config"):
        return 0
    raw = cfg.raw("vision_config")
    if not isinstance(raw, dict):
        raise cfg.error("vision_config", f"must be a mapping (the vision tower's config); got {type(raw).__name__}")
    v = HFConfig(raw, cfg.path, prefix="vision_config.")
    h, i, layers = v.int("hidden_size"), v.int("intermediate_size"), v.int("num_hidden_layers")
    return layers * (4 * h * h + 2 * h * i) + v.int("vision_output_dim", h) * text_hidden
