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


# The fields each method's reader uses (and a few every checkpoint of it carries), with the JSON
# types each may have: a wrong type is refused by field name before anything reads it. Other
# fields are left alone (checkpoints carry many that do not change the math).
_MAPPING, _LIST, _TEXT, _WHOLE, _FLAG = (dict,), (list,), (str,), (int,), (bool,)
_NULL = (type(None),)
METHOD_FIELDS: dict[str, dict[str, tuple]] = {
    "fp8": {"fmt": _TEXT, "activation_scheme": _TEXT + _NULL, "weight_block_size": _LIST + _NULL,
            "modules_to_not_convert": _LIST + _NULL, "ignored_layers": _LIST + _NULL},
    "mxfp4": {"modules_to_not_convert": _LIST + _NULL},
    "modelopt": {"quant_algo": _TEXT, "exclude_modules": _LIST + _NULL, "kv_cache_quant_algo": _TEXT + _NULL,
                 "group_size": _WHOLE + _NULL},
    "awq": {"bits": _WHOLE + _NULL, "w_bit": _WHOLE + _NULL, "group_size": _WHOLE + _NULL,
            "zero_point": _FLAG + _NULL, "modules_to_not_convert": _LIST + _NULL},
    "gptq": {"bits": _WHOLE, "group_size": _WHOLE + _NULL, "desc_act": _FLAG + _NULL, "sym": _FLAG + _NULL,
             "modules_to_not_convert": _LIST + _NULL},
    "compressed-tensors": {"config_groups": _MAPPING, "ignore": _LIST + _NULL, "format": _TEXT + _NULL,
                           "kv_cache_scheme": _MAPPING + _NULL},
}
CT_GROUP_FIELDS = {"weights": _MAPPING, "targets": _LIST + _NULL, "input_activations": _MAPPING + _NULL,
                   "output_activations": _MAPPING + _NULL}
CT_WEIGHT_FIELDS = {"num_bits": _WHOLE, "type": _TEXT, "strategy": _TEXT + _NULL, "group_size": _WHOLE + _NULL,
                    "symmetric": _FLAG + _NULL, "dynamic": _FLAG + _NULL}
_TYPE_NAMES = {dict: "a mapping", list: "a list", str: "text", int: "a whole number", bool: "true or false",
               type(None): "null"}


def check_types(cfg: HFConfig, data: dict, fields: dict[str, tuple], key: str) -> None:
    """Each of `fields` present in `data` has one of its JSON types (a bool is not a number);
    InputError naming `key.field` otherwise."""
    for name, types in fields.items():
        if name not in data:
            continue
        value = data[name]
        if isinstance(value, bool) and bool not in types or not isinstance(value, types):
            allowed = " or ".join(_TYPE_NAMES[t] for t in types)
            raise cfg.error(f"{key}.{name}", f"must be {allowed}; got {_shown(value)}")


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{type(value).__name__} {text[:50]}..."


def weight_dtypes(cfg: HFConfig) -> dict[str, str] | None:
    """The checkpoint's dtype per tensor group; None for an unquantized (bf16/fp16) checkpoint."""
    if not cfg.has("quantization_config"):
        return None
    q = cfg.raw("quantization_config")
    key = "quantization_config"
    if not isinstance(q, dict):
        raise cfg.error(key, "must be a mapping")
    check_types(cfg, q, {"quant_method": _TEXT + _NULL}, key)
    method = (q.get("quant_method") or "").lower()
    check_types(cfg, q, METHOD_FIELDS.get(method, {}), key)
    if method == "fp8":
        if q.get("fmt", "e4m3") != "e4m3":
            raise cfg.error(f"{key}.fmt", f"{q.get('fmt')!r} is not modelled; infersim models 'e4m3'")
        return _dtypes("fp8", q.get("modules_to_not_convert") or q.get("ignored_layers") or [], cfg,
                       "modules_to_not_convert")
    if method == "mxfp4":
        return _dtypes("mxfp4", [], cfg, "modules_to_not_convert", groups=("experts",))
    if method == "modelopt":
        algo = q.get("quant_algo", "").upper()
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
    (name, group), = groups.items()
    check_types(cfg, {name: group}, {name: _MAPPING}, key)
    check_types(cfg, group, CT_GROUP_FIELDS, f"{key}.{name}")
    weights = group.get("weights") or {}
    check_types(cfg, weights, CT_WEIGHT_FIELDS, f"{key}.{name}.weights")
    kind = (weights.get("num_bits"), weights.get("type"))
    dtype = {(4, "int"): "int4", (8, "float"): "fp8"}.get(kind)
    if dtype is None:
        raise cfg.error(f"{key}.weights", f"{kind[0]}-bit {kind[1]} weights are not modelled; infersim models "
                                          "4-bit int, 8-bit float")
    return _dtypes(dtype, q.get("ignore") or [], cfg, "ignore")
