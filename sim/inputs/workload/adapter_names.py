"""LoRA adapters named in a trace file (docs/lora.md): the generic CSV and JSONL formats read a column
`adapter` or `lora` (the first the file has), or the column the spec's `columns: {adapter: NAME}` maps
(e.g. a `model` column that names each request's adapter). Any value names an adapter; empty or missing
means the base model. Names become ids 0, 1, ... in the order they first appear in the file."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

ADAPTER_COLUMNS = ("adapter", "lora")  # read without a mapping; others (e.g. `model`) only when mapped


def adapter_column(header: Iterable[str], columns: dict[str, str] | None) -> str | None:
    """The column that names adapters in a file with these column names (None: none)."""
    mapped = (columns or {}).get("adapter")
    if mapped is not None:
        return mapped
    names = set(header)
    return next((name for name in ADAPTER_COLUMNS if name in names), None)


def adapter_extra(values: list) -> dict[str, np.ndarray]:
    """`Trace.extra`'s `adapter` (ids by first appearance; -1 for an empty or missing name) and
    `adapter_rank` (0: not given, the engine's max_lora_rank) of these per-row names; {} when none names one."""
    ids: dict = {}
    out = np.full(len(values), -1, dtype=np.int64)
    for row, name in enumerate(values):
        if name is None or name == "":
            continue
        key = str(name)
        out[row] = ids.setdefault(key, len(ids))
    if not ids:
        return {}
    return {"adapter": out, "adapter_rank": np.zeros(len(values), dtype=np.int64)}
