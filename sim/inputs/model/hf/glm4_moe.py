"""GLM-4.5 / GLM-4.5-Air (`glm4_moe`): GQA (q/k/v bias), the first `first_k_dense_replace`
layers dense (`intermediate_size`), the rest `n_routed_experts` experts of width
`moe_intermediate_size` (top `num_experts_per_tok`) plus `n_shared_experts`, and
`num_nextn_predict_layers` MTP layers."""

from __future__ import annotations

from sim.inputs.model.hf.common import HFConfig, base_fields, shared_expert_moe
from sim.inputs.model.hf.quant import weight_dtypes

MODEL_TYPES = ("glm4_moe",)


def read(cfg: HFConfig, model_type: str) -> dict:
    spec = base_fields(cfg)
    n = spec["n_layers"]
    spec["intermediate_size"] = cfg.int("intermediate_size")
    spec["moe"] = shared_expert_moe(cfg, n)
    spec["mtp_layers"] = cfg.int("num_nextn_predict_layers", 0, minimum=0)
    spec["weight_dtypes"] = weight_dtypes(cfg)
    return spec
