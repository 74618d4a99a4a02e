"""gpt-oss (20b, 120b): GQA with attention sinks, `layer_types` alternating sliding (window
`sliding_window`) and full attention, `num_local_experts` experts of width `intermediate_size`
(top `num_experts_per_tok`), MXFP4 experts (`quantization_config`)."""

from __future__ import annotations

from sim.inputs.model.hf.common import HFConfig, base_fields
from sim.inputs.model.hf.quant import weight_dtypes

MODEL_TYPES = ("gpt_oss",)
LAYER_KINDS = {"full_attention": "full", "sliding_attention": "sliding"}


def read(cfg: HFConfig, model_type: str) -> dict:
    spec = base_fields(cfg)
    n = spec["n_layers"]
    kinds = cfg.raw("layer_types")
    if kinds is None:  # transformers' default: every other layer sliding, from layer 0
        kinds = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n)]
    if not isinstance(kinds, list) or len(kinds) != n or any(k not in LAYER_KINDS for k in kinds):
        raise cfg.error("layer_types", f"must list {n} entries of {', '.join(LAYER_KINDS)}; got {kinds!r}")
    spec["intermediate_size"] = cfg.int("intermediate_size")
    top_k = cfg.int("num_experts_per_tok")
    if cfg.int("experts_per_token", top_k) != top_k:  # the published configs give both, equal
        raise cfg.error("experts_per_token", f"must equal num_experts_per_tok ({top_k})")
    spec["moe"] = {"n_experts": cfg.int("num_local_experts"), "experts_per_token": top_k}
    spec["layer_attention"] = [LAYER_KINDS[k] for k in kinds]
    spec["window_tokens"] = cfg.int("sliding_window")
    spec["attention_sinks"] = True
    spec["weight_dtypes"] = weight_dtypes(cfg)
    return spec
