"""Hugging Face `config.json` -> `ModelSpec` fields, one reader module per architecture family.

Each family module has `MODEL_TYPES` and `read(cfg, model_type) -> dict`. After it ran, any
field of `common.MATH_FIELDS` it did not read is refused by name (never a silent dense
fallback); so is a `model_type` no family reads. A config without `model_type` is read as a
Llama-style model (older configs)."""

from __future__ import annotations

from pathlib import Path

from sim.inputs.model.hf import deepseek, glm4_moe, gpt_oss, llama, llama4, qwen3_moe
from sim.inputs.model.hf.common import HFConfig

FAMILIES = {t: family for family in (llama, qwen3_moe, deepseek, gpt_oss, llama4, glm4_moe) for t in family.MODEL_TYPES}


def supported_model_types() -> list[str]:
    return sorted(FAMILIES)


def from_hf_config(config: dict, path: Path) -> dict:
    """ModelSpec fields of one config.json (validated later by the ModelSpec schema)."""
    cfg = HFConfig(config, Path(path))
    model_type = cfg.raw("model_type", "llama")
    if not isinstance(model_type, str):
        raise cfg.error("model_type", f"must be text, one of {', '.join(supported_model_types())}; got {model_type!r}")
    family = FAMILIES.get(model_type)
    if family is None:
        raise cfg.error("model_type", f"{model_type!r} is not modelled; infersim reads "
                                      f"{', '.join(supported_model_types())}")
    spec = family.read(cfg, model_type)
    cfg.refuse_unread(model_type)
    name = config.get("_name_or_path") or Path(path).parent.name or Path(path).stem
    spec.update({"name": name, "hf_name": config.get("_name_or_path", ""),
                 "provenance": f"Hugging Face config.json at {path}"})
    return {key: value for key, value in spec.items() if value is not None}
