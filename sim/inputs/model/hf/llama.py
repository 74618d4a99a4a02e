"""Llama-style decoders: llama, mistral, mixtral (MoE), qwen2, qwen3 (dense).

Sliding-window attention: Mistral / Mixtral apply `sliding_window` to every layer when it is set.
Qwen2 / Qwen3 as transformers' Qwen2Config / Qwen3Config read them: the window applies only with
`use_sliding_window: true`, to the layers whose `layer_types` entry is "sliding_attention" or, without
`layer_types`, to the layers from `max_window_layers` on. transformers' class defaults for absent
keys (sliding_window 4096, max_window_layers 28) are not assumed: with `use_sliding_window: true`
both must be in the file; a `true` that makes no layer slide, or `layer_types` naming sliding
layers without a window, is refused (a contradiction in the file, never silently read as full)."""

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


QWEN_LAYER_TYPES = {"full_attention": "full", "sliding_attention": "sliding"}


def _window(cfg: HFConfig, model_type: str, n_layers: int) -> dict:
    if model_type in ("qwen2", "qwen3"):
        return _qwen_window(cfg, n_layers)
    window = cfg.opt_int("sliding_window")
    if window is None:
        return {}
    return {"layer_attention": ["sliding"] * n_layers, "window_tokens": window}


def _qwen_window(cfg: HFConfig, n_layers: int) -> dict:
    """Qwen2/Qwen3's per-layer attention (module docstring); {} when every layer is full."""
    use = cfg.raw("use_sliding_window", False)
    if not isinstance(use, bool):
        raise cfg.error("use_sliding_window", f"must be true or false; got {use!r}")
    window = cfg.opt_int("sliding_window")
    names = cfg.raw("layer_types")
    if use and window is None:
        raise cfg.error("sliding_window", "required with use_sliding_window: true (the window in tokens; "
                                          "transformers' default of 4096 is not assumed)")
    if names is not None:
        if not (isinstance(names, list) and len(names) == n_layers and all(n in QWEN_LAYER_TYPES for n in names)):
            raise cfg.error("layer_types", f"must list {n_layers} entries (num_hidden_layers) of "
                                           f"{', '.join(QWEN_LAYER_TYPES)}; got {names!r}")
        kinds = [QWEN_LAYER_TYPES[n] for n in names]
        cfg.int("max_window_layers", 0, minimum=0)  # layer_types wins over it, as in transformers
        if "sliding" in kinds and not use:
            raise cfg.error("layer_types", "names sliding_attention layers but use_sliding_window is false "
                                           "(transformers then drops the window): make them agree")
    else:
        first = cfg.int("max_window_layers", None if use else 0, minimum=0)
        kinds = ["full"] * min(first, n_layers) + ["sliding"] * max(n_layers - first, 0)
    if use and "sliding" not in kinds:
        raise cfg.error("use_sliding_window", f"is true but no layer slides (max_window_layers / layer_types "
                                              f"leave all {n_layers} layers full, as transformers reads them): "
                                              "set it false or name the sliding layers")
    return {"layer_attention": kinds, "window_tokens": window} if use else {}
