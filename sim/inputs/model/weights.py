"""Which dtype each tensor group of a model is served in, and the weight bytes one GPU holds.

`--weight-dtype` and a checkpoint's own dtypes (`ModelSpec.weight_dtypes`, read from its
`quantization_config`):
- `auto`: as the checkpoint stores them (vLLM and SGLang read `quantization_config` the same way
  and serve the weights as stored); bf16 for a model without per-group dtypes. This is the
  default of every command: a config that names no weight dtype gets `as_stored(model)`.
- any dtype name: every linear layer (attention, MLPs, experts) in it; router and embeddings as
  the checkpoint stores them (bf16). For a model without per-group dtypes every weight takes it,
  as before (so `bf16`, the default, is the bf16 checkpoint: DeepSeek's fp8_cast_bf16.py output),
  except a `linear_only` format (nvfp4, mxfp4: sim/specs/dtypes.yaml), which leaves embeddings bf16.
"""

from __future__ import annotations

import math

from sim.inputs.dtypes import bytes_per_element, is_linear_only
from sim.inputs.model.params import weight_elements_by_group
from sim.inputs.model.spec import WEIGHT_GROUPS, ModelSpec

AUTO = "auto"
LINEAR_GROUPS = ("attention", "dense_mlp", "experts", "shared_experts")
CHECKPOINT_DEFAULT = "bf16"  # a group a quantization_config leaves out is stored in bf16


def group_dtypes(model: ModelSpec, weight_dtype: str) -> dict[str, str] | None:
    """dtype per tensor group, or None when every weight takes `weight_dtype` (no per-group dtypes)."""
    if model.weight_dtypes is None:
        if weight_dtype != AUTO and is_linear_only(weight_dtype):  # NVFP4 / MXFP4: linear layers only
            return {**dict.fromkeys(WEIGHT_GROUPS, CHECKPOINT_DEFAULT), **dict.fromkeys(LINEAR_GROUPS, weight_dtype)}
        return None if weight_dtype != AUTO else dict.fromkeys(WEIGHT_GROUPS, CHECKPOINT_DEFAULT)
    out = {group: model.weight_dtypes.get(group, CHECKPOINT_DEFAULT) for group in WEIGHT_GROUPS}
    if weight_dtype != AUTO:
        out.update(dict.fromkeys(LINEAR_GROUPS, weight_dtype))
    return out


def uniform_dtype(model: ModelSpec, weight_dtype: str) -> str | None:
    """The one dtype every weight takes, or None when groups differ."""
    dtypes = group_dtypes(model, weight_dtype)
    if dtypes is None:
        return weight_dtype
    values = set(dtypes.values())
    return values.pop() if len(values) == 1 else None


def weight_bytes_by_group(model: ModelSpec, tp: int, weight_dtype: str, with_mtp: bool = False) -> dict[str, int]:
    """Bytes per tensor group on one GPU (whole bytes per group), plus `extra` for weights outside
    the text decoder (a vision tower, stored as its checkpoint's bf16, replicated)."""
    elements = weight_elements_by_group(model, tp, with_mtp=with_mtp)
    dtypes = group_dtypes(model, weight_dtype) or {}
    where = "--weight-dtype"
    out = {g: math.ceil(n * bytes_per_element(dtypes.get(g, weight_dtype), where)) for g, n in elements.items()}
    if model.extra_weight_params:
        out["extra"] = math.ceil(model.extra_weight_params * bytes_per_element(CHECKPOINT_DEFAULT))
    return out


def weight_bytes_per_gpu(model: ModelSpec, tp: int, weight_dtype: str, with_mtp: bool = False) -> int:
    """All weight bytes one GPU holds. Without per-group dtypes: ceil(elements x bytes) over the
    whole model, as the memory planner always computed it."""
    uniform = uniform_dtype(model, weight_dtype)
    if uniform is not None and not model.extra_weight_params:
        elements = sum(weight_elements_by_group(model, tp, with_mtp=with_mtp).values())
        return math.ceil(elements * bytes_per_element(uniform, "--weight-dtype"))
    return sum(weight_bytes_by_group(model, tp, weight_dtype, with_mtp).values())


def as_stored(model: ModelSpec) -> str:
    """The weight dtype a config that names none takes: `auto` for a checkpoint with per-group dtypes
    (served as stored), else bf16 (the dense checkpoint, spelled as before so its outputs do not move)."""
    return AUTO if model.weight_dtypes is not None else CHECKPOINT_DEFAULT


def describe_weight_dtype(model: ModelSpec, weight_dtype: str) -> str:
    """One line for people: 'auto (as stored: fp8 attention, dense_mlp, experts, shared_experts; bf16
    router, embedding)', or the one dtype every weight takes."""
    dtypes = group_dtypes(model, weight_dtype)
    uniform = uniform_dtype(model, weight_dtype)
    if dtypes is None or uniform is not None:
        shown = uniform or weight_dtype
        return f"{weight_dtype} (as stored)" if weight_dtype == AUTO else shown
    by_dtype: dict[str, list[str]] = {}
    for group, dtype in dtypes.items():
        by_dtype.setdefault(dtype, []).append(group)
    parts = "; ".join(f"{dtype} {', '.join(groups)}" for dtype, groups in by_dtype.items())
    return f"{weight_dtype} ({'as stored: ' if weight_dtype == AUTO else ''}{parts})"
