"""How measured results name things -> infersim's bundled names (aliases only, no numbers)."""

from __future__ import annotations

import re
from pathlib import Path

from sim.errors import InputError
from sim.inputs.engines.preset import engine_families, engine_names, engine_versions
from sim.inputs.hardware import bundled_profiles
from sim.inputs.model import bundled_models

GPU_ALIASES = {
    "h100": "h100-sxm", "h100-sxm": "h100-sxm", "h100-sxm5-80gb": "h100-sxm", "h100-80gb-hbm3": "h100-sxm",
    "h100-pcie": "h100-pcie", "h200": "h200", "h200-sxm": "h200", "b200": "b200",
    "a100-sxm4-80gb": "a100-80g-sxm", "a100-80gb": "a100-80g-sxm", "a100-80gb-pcie": "a100-80g-pcie",
    "l40s": "l40s", "mi300x": "mi300x",
}
ENGINE_ALIASES = {"vllm": "vllm", "sglang": "sglang", "tensorrt-llm": "trtllm", "trt-llm": "trtllm",
                  "trtllm": "trtllm", "lmdeploy": "lmdeploy", "turbomind": "lmdeploy"}
DTYPE_ALIASES = {"bf16": "bf16", "bfloat16": "bf16", "fp16": "fp16", "float16": "fp16", "fp8": "fp8",
                 "int8": "int8", "w8a8": "int8", "int4": "int4", "awq": "int4", "gptq": "int4", "w4a16": "int4",
                 "fp4": "fp4", "nvfp4": "nvfp4", "mxfp4": "mxfp4",
                 "auto": "auto"}  # auto: as the checkpoint stores its weights (per-group dtypes of the model spec)


def gpu_name(where: str, text: str) -> str:
    key = text.strip().lower().replace(" ", "-")
    name = GPU_ALIASES.get(key, key)
    if name not in bundled_profiles() and not Path(text).is_file():
        raise InputError(where, "gpu", f"unknown GPU {text!r}; known: {', '.join(sorted(GPU_ALIASES))}, or a "
                                       f"bundled profile ({', '.join(bundled_profiles())}), or a profile YAML path")
    return name if name in bundled_profiles() else text


def model_name(where: str, text: str) -> str:
    key = text.strip().lower().removeprefix("meta-llama/").removeprefix("mistralai/").removesuffix("-instruct")
    key = key.replace("meta-llama-", "llama-").replace("-v0.1", "")
    if key in bundled_models():
        return key
    if Path(text).is_file():
        return text
    raise InputError(where, "model", f"no model spec for {text!r}; bundled: {', '.join(bundled_models())}, or a "
                                     f"spec YAML / config.json path")


def engine_name(where: str, text: str) -> str:
    key = text.strip().lower()
    name = ENGINE_ALIASES.get(key, key)
    if name in engine_names() or Path(text).is_file():
        return name if name in engine_names() else text
    raise InputError(where, "engine", f"unknown engine {text!r}; bundled: {', '.join(engine_names())}, or a "
                                      f"preset YAML path")


# Rows that name a family but no version were measured before the newest presets: the LMSYS large-scale EP
# blog (May 2025, SGLang 0.4.x) and the TensorRT-LLM perf-overview tables (trtllm-bench, which trtllm@1.0 describes).
UNVERSIONED = {"sglang": "sglang@0.4", "trtllm": "trtllm@1.0"}


def engine_for_version(name: str, version_text: str) -> str:
    """A case's preset: a bare family name takes the family's oldest bundled version at or above the
    row's major.minor (`1.2.0rc2` -> trtllm@1.2, `0.19.0` -> trtllm@1.0, `v0.13.0` -> vllm@0.15), its newest
    if none is; without a version, the one the family's older rows were measured on (UNVERSIONED)."""
    if name not in engine_families():
        return name
    found = re.search(r"(\d+)\.(\d+)", version_text)
    if found is None:
        return UNVERSIONED.get(name, engine_families()[name])
    wanted = (int(found.group(1)), int(found.group(2)))
    for version in (v for v in engine_versions() if v.partition("@")[0] == name):  # ascending
        if tuple(int(part) for part in version.partition("@")[2].split(".")[:2]) >= wanted:
            return version
    return engine_families()[name]


def dtype_name(where: str, field: str, text: str) -> str:
    key = text.strip().lower()
    if key not in DTYPE_ALIASES:
        raise InputError(where, field, f"unknown dtype {text!r}; allowed: {', '.join(sorted(DTYPE_ALIASES))}")
    return DTYPE_ALIASES[key]
