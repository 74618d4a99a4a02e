"""Qwen3-MoE (Qwen3-30B-A3B, Qwen3-235B-A22B): `num_experts` routed experts of width
`moe_intermediate_size`, top `num_experts_per_tok`, no shared expert; a layer is MoE when it is
not in `mlp_only_layers` and (layer + 1) is a multiple of `decoder_sparse_step` (transformers'
Qwen3MoeDecoderLayer); dense layers are `intermediate_size` wide."""

from __future__ import annotations

from sim.inputs.model.hf.common import HFConfig, base_fields
from sim.inputs.model.hf.llama import _window
from sim.inputs.model.hf.quant import weight_dtypes

MODEL_TYPES = ("qwen3_moe",)


def read(cfg: HFConfig, model_type: str) -> dict:
    spec = base_fields(cfg)
    n = spec["n_layers"]
    spec["intermediate_size"] = cfg.int("intermediate_size")
    step = cfg.int("decoder_sparse_step", 1)
    dense_only = set(cfg.int_list("mlp_only_layers"))
    if any(i >= n for i in dense_only):
        raise cfg.error("mlp_only_layers", f"layer indices must be below num_hidden_layers ({n})")
    dense = sorted(i for i in range(n) if i in dense_only or (i + 1) % step)
    spec["moe"] = {
        "n_experts": cfg.int("num_experts"), "experts_per_token": cfg.int("num_experts_per_tok"),
        "expert_intermediate_size": cfg.int("moe_intermediate_size"), "dense_layers": dense,
    }
    spec.update(_window(cfg, "qwen3", n))
    spec["weight_dtypes"] = weight_dtypes(cfg)
    return spec
