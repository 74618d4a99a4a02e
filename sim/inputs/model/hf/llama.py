"""Llama-style decoders: llama, mistral, mixtral (MoE), qwen2, qwen3 (dense).

Sliding-window attention: Mistral / Mixtral apply `sliding_window` to every layer when it is set;
Qwen2 only with `use_sliding_window: true`, to the layers from `max_window_layers` on (as
transformers' Qwen2 does)."""

from __future__ import annotations

from sim.inputs.model.hf.common import HFConfig, base_fields
from sim.inputs.model.hf.quant import weight_dtypes

MODEL_TYPES = ("llama", "mistral", "mixtral", "qwen2", "qwen3")


def read(cfg: HFConfig, model_type: str) -> dict:
    spec = base_fields(cfg, qkv_bias_default=model_type == "qwen2")
    spec["intermediate_size"] = cfg.int("intermediate_size")
    n_experts = cfg.opt_int("num_local_experts")
    if n_experts:
        spec["moe"] = {"n_experts": n_experts, "experts_per_token": cfg.int("num_experts_per_tok", 2)}
    spec.update(_window(cfg, model_type, spec["n_layers"]))
    spec["weight_dtypes"] = weight_dtypes(cfg)
    return spec


def _window(cfg: HFConfig, model_type: str, n_layers: int) -> dict:
    window = cfg.opt_int("sliding_window")
    if model_type in ("qwen2", "qwen3"):
        use = bool(cfg.raw("use_sliding_window", False))
        first = cfg.int("max_window_layers", n_layers, minimum=0)
        if not use or window is None or first >= n_layers:
            return {}
        kinds = ["full"] * first + ["sliding"] * (n_layers - first)
    else:
        if window is None:
            return {}
        kinds = ["sliding"] * n_layers
    return {"layer_attention": kinds, "window_tokens": window}
