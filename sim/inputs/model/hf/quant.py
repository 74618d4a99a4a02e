"""`quantization_config` -> the checkpoint's weight dtype per tensor group (`spec.WEIGHT_GROUPS`).

Modelled methods (what vLLM loads from them):
- `fp8` (DeepSeek-V3/R1, Kimi-K2, Qwen3-FP8): e4m3 weights with one fp32 scale per 128x128 block
  (the scales, 4 B per 16,384 weights, are left out: 0.02 %) on every linear layer of the decoder;
  router, embeddings and LM head stay bf16 as the checkpoint stores them.
- `mxfp4` (gpt-oss): vLLM's Mxfp4Config quantizes the MoE experts only; the config's
  `modules_to_not_convert` lists attention, router, embeddings and LM head.
- `modelopt` with `quant_algo` NVFP4 or FP8: every linear layer but the `exclude_modules`.
- `awq` / `gptq` with 4 bits: int4 weight-only on every linear layer but the listed exclusions.
- `compressed-tensors` with one config group of 4-bit int or 8-bit float weights and its `ignore` list.
Anything else is refused by name.
"""

from __future__ import annotations

from sim.inputs.model.hf.common import HFConfig

LINEAR_GROUPS = ("attention", "dense_mlp", "experts", "shared_experts")
UNQUANTIZED = "bf16"


def _group_of(pattern: str) -> str | None:
    """The tensor group an exclusion pattern names (module paths of HF checkpoints)."""
    p = pattern.lower()
    if "lm_head" in p or "embed" in p:
        return "embedding"
    if "shared_expert" in p:
        return "shared_experts"
    if "router" in p or p.rstrip("*$").endswith(("mlp.gate", ".gate")):
        return "router"
    if "attn" in p or "attention" in p:
        return "attention"
    if "expert" in p:
        return "experts"
    if "mlp" in p:
        return "dense_mlp"
    return None


VISION_TOWER_PREFIXES = ("vision_model", "multi_modal_projector")  # Llama-4 checkpoints' module names


def _names_vision_tower(pattern: str) -> bool:
    return pattern.removeprefix("re:").lstrip("^").startswith(VISION_TOWER_PREFIXES)


def _dtypes(quantized: str, excluded: list, cfg: HFConfig, key: str, groups=LINEAR_GROUPS) -> dict[str, str]:
    out = dict.fromkeys(("router", "embedding"), UNQUANTIZED)
    out.update(dict.fromkeys(groups, quantized))
    for pattern in excluded:
        if not isinstance(pattern, str):
            raise cfg.error(f"quantization_config.{key}", f"must list module names; got {pattern!r}")
        if _names_vision_tower(pattern):
            continue  # outside the text decoder: counted in extra_weight_params, unquantized
        group = _group_of(pattern.removeprefix("re:"))
        if group is None:
            raise cfg.error(f"quantization_config.{key}", f"cannot tell which tensor group {pattern!r} names "
                                                          "(attention, mlp, experts, shared experts, router, lm_head)")
        out[group] = UNQUANTIZED
    return out


def weight_dtypes(cfg: HFConfig) -> dict[str, str] | None:
    """The checkpoint's dtype per tensor group; None for an unquantized (bf16/fp16) checkpoint."""
    if not cfg.has("quantization_config"):
        return None
    q = cfg.raw("quantization_config")
    key = "quantization_config"
    if not isinstance(q, dict):
        raise cfg.error(key, "must be a mapping")
    method = str(q.get("quant_method", "")).lower()
    if method == "fp8":
        if q.get("fmt", "e4m3") != "e4m3":
            raise cfg.error(f"{key}.fmt", f"{q.get('fmt')!r} is not modelled; infersim models 'e4m3'")
        return _dtypes("fp8", q.get("modules_to_not_convert") or q.get("ignored_layers") or [], cfg,
                       "modules_to_not_convert")
    if method == "mxfp4":
        return _dtypes("mxfp4", [], cfg, "modules_to_not_convert", groups=("experts",))
    if method == "modelopt":
        algo = str(q.get("quant_algo", "")).upper()
        dtype = {"NVFP4": "nvfp4", "FP8": "fp8"}.get(algo)
        if dtype is None:
            raise cfg.error(f"{key}.quant_algo", f"{q.get('quant_algo')!r} is not modelled; infersim models "
                                                 "NVFP4, FP8")
        return _dtypes(dtype, q.get("exclude_modules") or [], cfg, "exclude_modules")
    if method in ("awq", "gptq"):
        bits = q.get("bits", q.get("w_bit"))
        if bits != 4:
            raise cfg.error(f"{key}.bits", f"{bits!r} is not modelled; infersim models 4-bit {method}")
        return _dtypes("int4", q.get("modules_to_not_convert") or [], cfg, "modules_to_not_convert")
    if method == "compressed-tensors":
        return _compressed_tensors(q, cfg)
    raise cfg.error(f"{key}.quant_method", f"{q.get('quant_method')!r} is not modelled; infersim models fp8, "
                                           "mxfp4, modelopt (NVFP4, FP8), awq, gptq (4-bit), compressed-tensors")


def _compressed_tensors(q: dict, cfg: HFConfig) -> dict[str, str]:
    groups = q.get("config_groups") or {}
    key = "quantization_config.config_groups"
    if len(groups) != 1:
        raise cfg.error(key, f"{len(groups)} groups are not modelled; infersim models exactly one")
    weights = (next(iter(groups.values())) or {}).get("weights") or {}
    kind = (weights.get("num_bits"), weights.get("type"))
    dtype = {(4, "int"): "int4", (8, "float"): "fp8"}.get(kind)
    if dtype is None:
        raise cfg.error(f"{key}.weights", f"{kind[0]}-bit {kind[1]} weights are not modelled; infersim models "
                                          "4-bit int, 8-bit float")
    return _dtypes(dtype, q.get("ignore") or [], cfg, "ignore")
