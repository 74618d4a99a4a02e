"""DeepSeek-V2 / V3 / R1 and Kimi-K2 (`kimi_k2`, DeepseekV3ForCausalLM): multi-head latent
attention, `n_routed_experts` experts of width `moe_intermediate_size` plus `n_shared_experts`
shared ones, the first `first_k_dense_replace` layers dense, MTP modules
(`num_nextn_predict_layers`). `moe_layer_freq` other than 1 is refused (no released checkpoint
uses it); `ep_size` is a training-time layout (refused unless 1)."""

from __future__ import annotations

from sim.inputs.model.hf.common import HFConfig, base_fields, shared_expert_moe
from sim.inputs.model.hf.quant import weight_dtypes

MODEL_TYPES = ("deepseek_v2", "deepseek_v3", "kimi_k2")


def read(cfg: HFConfig, model_type: str) -> dict:
    spec = base_fields(cfg)
    n = spec["n_layers"]
    nope, rope = cfg.int("qk_nope_head_dim"), cfg.int("qk_rope_head_dim")
    spec["head_dim"] = nope + rope  # q/k head width (v: v_head_dim)
    spec["n_kv_heads"] = spec["n_heads"]  # MLA rebuilds a K and V per head from the latent
    cfg.read.add("num_key_value_heads")
    spec["mla"] = {
        "q_lora_rank": cfg.opt_int("q_lora_rank"), "kv_lora_rank": cfg.int("kv_lora_rank"),
        "qk_nope_head_dim": nope, "qk_rope_head_dim": rope, "v_head_dim": cfg.int("v_head_dim"),
    }
    spec["intermediate_size"] = cfg.int("intermediate_size")
    cfg.expect("moe_layer_freq", 1, "every layer past first_k_dense_replace is MoE")
    cfg.expect("ep_size", 1, "a training-time expert layout")
    if cfg.opt_int("n_routed_experts"):
        spec["moe"] = shared_expert_moe(cfg, n)
    spec["mtp_layers"] = cfg.int("num_nextn_predict_layers", 0, minimum=0)
    spec["weight_dtypes"] = weight_dtypes(cfg)
    return spec
