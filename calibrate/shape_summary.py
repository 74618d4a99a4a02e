"""One line per shape a measurements frame timed: what `calibrate run` prints after timing."""

from __future__ import annotations

import pandas as pd

from calibrate.measurements import OPS


def _int(value) -> int | None:
    return None if pd.isna(value) else int(value)


def _shape_text(row) -> str:
    op = row["op"]
    if op in ("decode_attention", "mla_decode_attention", "prefill_attention"):
        text = f"heads {_int(row['n_heads'])}/{_int(row['n_kv_heads'])} x {_int(row['head_dim'])}"
        return text + (f" (V {_int(row['v_head_dim'])})" if _int(row["v_head_dim"]) else "")
    if op in ("allreduce", "send_recv"):
        return "payloads"
    text = f"N={_int(row['n_out'])} K={_int(row['k_in'])}"
    padded = (_int(row["n_out_padded"]), _int(row["k_in_padded"]))
    if padded != (None, None):
        text += f" (ran N={padded[0]} K={padded[1]}, padded to the kernel's alignment)"
    return text + (f" x {_int(row['n_experts'])} experts" if _int(row["n_experts"]) else "")


def timed_shape_lines(frame: pd.DataFrame) -> list[str]:
    """'op tp=T: shape [kernel]: n points' per distinct shape, ops in schema order."""
    lines = []
    order = {op: i for i, op in enumerate(OPS)}
    rows = frame.assign(_order=frame["op"].map(order), _shape=frame.apply(_shape_text, axis=1))
    for (_, op, tp, shape, kernel), group in rows.groupby(
        ["_order", "op", "tp", "_shape", rows["kernel"].fillna("")], sort=True
    ):
        mode = ",".join(sorted(group["timing_mode"].dropna().unique()))
        lines.append(f"{op} tp={tp}: {shape} [{kernel or 'kernel not recorded'}; {mode}]: {len(group)} points")
    return lines


FIT_CLASSES = {"gemm": None, "prefill_attention": ("prefill_attention",), "decode_attention": ("decode_attention",)}


def kernel_classes(frame: pd.DataFrame) -> dict:
    """Per fit class, the kernel classes and timing modes of the rows it reads:
    `{class: {"kernel": {name: rows}, "timing_mode": {mode: rows}}}` (a file without those
    columns counts its rows under "not recorded"). GEMM: every op with n_out (plain GEMMs)."""
    out = {}
    for name, ops in FIT_CLASSES.items():
        rows = frame[frame["op"].isin(ops)] if ops else frame[frame["n_out"].notna() & frame["n_experts"].isna()]
        if rows.empty:
            continue
        out[name] = {column: {str(k): int(v) for k, v in rows[column].fillna("not recorded").value_counts().items()}
                     for column in ("kernel", "timing_mode")}  # fmt: skip
    return out
