"""Element sizes per dtype, read from `sim/specs/dtypes.yaml` (no dtype sizes in code)."""

from __future__ import annotations

from functools import lru_cache

import yaml

from sim.errors import InputError
from sim.paths import model_specs_dir


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


def bytes_per_element(dtype: str, where: str = "--dtype") -> int:
    return int(_entry(dtype, where)["bytes"])


def peak_key(dtype: str, where: str = "--dtype") -> str:
    """The profile `compute` key whose peak this dtype's GEMMs run at."""
    return str(_entry(dtype, where)["peak"])
