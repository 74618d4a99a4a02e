"""Element sizes per dtype, read from `sim/specs/dtypes.yaml` (no dtype sizes in code).

Sizes may be fractional (int4/fp4: half a byte per element); callers that count whole bytes
round the product, never the element size.
"""

from __future__ import annotations

from functools import lru_cache

import yaml

from sim.errors import InputError
from sim.paths import model_specs_dir

FULL_PRECISION = ("bf16", "fp16", "fp32")


@lru_cache(maxsize=1)
def _table() -> dict:
    return yaml.safe_load((model_specs_dir().parent / "dtypes.yaml").read_text())


def dtype_names() -> list[str]:
    return sorted(_table())


def _entry(dtype: str, where: str) -> dict:
    table = _table()
    if dtype not in table:
        raise InputError(where, None, f"unknown dtype {dtype!r}; allowed: {', '.join(sorted(table))}")
    return table[dtype]


def bytes_per_element(dtype: str, where: str = "--dtype") -> float:
    value = float(_entry(dtype, where)["bytes"])
    return int(value) if value.is_integer() else value


def kv_bytes_per_element(dtype: str, where: str = "--kv-dtype") -> float:
    """Element size of a KV-cache dtype; InputError for formats not used for the KV cache."""
    if not _entry(dtype, where).get("kv", True):
        allowed = ", ".join(name for name in dtype_names() if _table()[name].get("kv", True))
        raise InputError(where, None, f"{dtype} is not a KV-cache dtype; allowed: {allowed}")
    return bytes_per_element(dtype, where)


def is_linear_only(dtype: str, where: str = "--weight-dtype") -> bool:
    """Whether checkpoints in `dtype` quantize only the linear layers (embedding, LM head, router stay bf16)."""
    return bool(_entry(dtype, where).get("linear_only", False))


def peak_key(dtype: str, where: str = "--dtype") -> str:
    """The profile `compute` key whose peak this dtype's GEMMs run at."""
    return str(_entry(dtype, where)["peak"])


def dequant_compute_factor(dtype: str, where: str = "--dtype") -> float:
    """How much longer a GEMM's compute term takes for dequantizing weight-only formats (1 otherwise)."""
    return float(_entry(dtype, where).get("dequant_compute_factor", 1.0))


def is_quantized(dtype: str) -> bool:
    """True for checkpoints stored below 16 bits (the case a preset's quantized KV default covers)."""
    return dtype not in FULL_PRECISION


def compute_path(dtype: str, has_peak, where: str = "--weight-dtype") -> tuple[str, float, str]:
    """(profile peak key, dequant compute factor, efficiency key) of GEMMs with `dtype` weights on a
    GPU; `has_peak(key)` says whether the profile has that tensor-core peak. A dtype with `requires`
    runs natively only where that peak exists, else takes its `fallback` (dtypes.yaml)."""
    entry = _entry(dtype, where)
    required = entry.get("requires")
    if required is not None and not has_peak(required):
        fallback = entry["fallback"]
        return str(fallback["peak"]), float(fallback.get("dequant_compute_factor", 1.0)), "int4"
    return str(entry["peak"]), float(entry.get("dequant_compute_factor", 1.0)), str(entry.get("efficiency_as", dtype))
