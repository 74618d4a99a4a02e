"""Measured GEMM tables from measurement rows (see sim/cost/tables.py for how they are used).

One table per (N, K, bytes per element): the median measured time at each measured M (repeats
across files, e.g. two models sharing a projection shape, are pooled). Shapes measured at fewer
than two M values get no table. A shape measured on two devices is refused: a table is one GPU's.
"""

from __future__ import annotations

import pandas as pd

from calibrate.measurements import ATTENTION_OPS, GEMM_OPS
from sim.cost.attention_tables import ratio_entry
from sim.cost.tables import table_entry
from sim.errors import InputError
from sim.inputs.dtypes import bytes_per_element


def gemm_table_entries(frame: pd.DataFrame) -> list[dict]:
    """`calibration.tables.gemm` entries from the GEMM rows of a validated measurements frame."""
    rows = frame[frame["op"].isin(GEMM_OPS)].copy()
    if rows.empty:
        return []
    rows["bytes_per_el"] = [bytes_per_element(d, "dtype") for d in rows["dtype"].astype(str)]
    entries = []
    for (n_out, k_in, size), shape_rows in rows.groupby(["n_out", "k_in", "bytes_per_el"], sort=True):
        devices = shape_rows["device"].astype(str).unique()
        if len(devices) > 1:
            raise InputError("measurements", "device", f"one device per GEMM shape in a fit (got {', '.join(devices)})")
        medians = shape_rows.groupby("m_tokens")["time_s"].median().sort_index()
        if len(medians) < 2:
            continue
        first = shape_rows.iloc[0]
        entries.append(table_entry(str(first["op"]), int(first["tp"]), int(n_out), int(k_in), int(size),
                                   medians.index.astype(int), medians.to_numpy(dtype=float)))  # fmt: skip
    return entries


def holdout_relative_errors(entries: list[dict]) -> dict[str, list[float]]:
    """Leave every other measured M out of each table and predict it from the rest (log-log
    interpolation between the kept neighbours): relative errors (predicted / measured - 1) per op.
    Only interior points are predicted (the first and last M are always kept)."""
    import numpy as np

    out: dict[str, list[float]] = {}
    for entry in entries:
        m = np.log(np.asarray(entry["m_tokens"], dtype=float))
        t = np.log(np.asarray(entry["time_us"], dtype=float))
        if m.size < 3:
            continue
        keep = np.zeros(m.size, dtype=bool)
        keep[::2] = True
        keep[-1] = True
        held = ~keep
        predicted = np.interp(m[held], m[keep], t[keep])
        out.setdefault(entry["op"], []).extend((np.exp(predicted - t[held]) - 1.0).tolist())
    return out


def attention_ratio_entries(frame: pd.DataFrame, smooth_hw) -> list[dict]:
    """`calibration.tables.attention` entries: per op kind, head shape (and block size for decode),
    the median measured / smooth-model ratio at each axis value (pairs or KV tokens)."""
    from calibrate.predict import attention_axis, smooth_attention_s
    from sim.inputs.dtypes import peak_key

    entries = []
    for kind in ATTENTION_OPS:
        rows = frame[frame["op"] == kind].reset_index(drop=True)
        if rows.empty:
            continue
        keys = ["n_heads", "n_kv_heads", "head_dim", "dtype"] + (["block_size"] if kind == "decode_attention" else [])
        for key, group in rows.groupby(keys, sort=True):
            group = group.reset_index(drop=True)
            dtype = str(group["dtype"].iloc[0])
            el_bytes = bytes_per_element(dtype, "dtype")
            smooth = smooth_attention_s(group, smooth_hw, el_bytes, smooth_hw.peak_flops(peak_key(dtype, "dtype")))
            ratios = pd.Series(group["time_s"].astype("float64").to_numpy() / smooth, index=attention_axis(group))
            medians = ratios.groupby(level=0).median().sort_index()
            block = int(key[4]) if kind == "decode_attention" else None
            entries.append(ratio_entry(kind, int(key[0]), int(key[1]), int(key[2]), el_bytes, block,
                                       medians.index.to_numpy(), medians.to_numpy()))  # fmt: skip
    return entries
