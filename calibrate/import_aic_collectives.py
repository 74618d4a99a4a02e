"""AIConfigurator's measured all-reduce tables as a profile's measured all-reduce tables.

AIConfigurator (github.com/ai-dynamo/aiconfigurator, Apache-2.0) publishes per GPU
- `<gpu>/comm/nccl/<nccl version>/nccl_perf.parquet`: nccl-tests timings (columns op_name, nccl_dtype,
  num_gpus, message_size, latency), all_gather / alltoall / reduce_scatter / all_reduce;
- `<gpu>/comm/<engine>/<version>/custom_allreduce_perf.parquet`: the engine's own all-reduce kernel
  (columns allreduce_dtype, num_gpus, message_size, latency, and for vLLM `backend`: vllm_graph, timed
  inside a CUDA graph, or vllm_eager).
`message_size` counts **elements** (its collector divides nccl-tests' bytes by the element size and
builds the custom all-reduce's tensor of that many elements), `latency` is in **milliseconds**.

Kept: all_reduce rows of 16-bit dtypes (half, bfloat16: payload bytes = 2 x elements), and of vLLM's
custom kernel the CUDA-graph rows (the engines capture the steps whose all-reduces are small; the
eager rows time Python dispatch too). Repeats keep their median. Written as the .npz that
`calibration.tables.allreduce.file` names (sim/cost/collective_tables.py).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd

from sim.errors import InputError

SIXTEEN_BIT = {"half": 2, "float16": 2, "bfloat16": 2, "fp16": 2, "bf16": 2}
NEEDED = ("num_gpus", "message_size", "latency")


def read_comm_rows(path: Path) -> pd.DataFrame:
    """Rows of an nccl_perf or custom_allreduce_perf table (.parquet or .csv), checked."""
    if not path.is_file():
        raise InputError(path, None, "file not found")
    try:
        frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    except (OSError, ValueError) as exc:
        raise InputError(path, None, f"an AIConfigurator comm table, .parquet or .csv ({exc})") from None
    for column in NEEDED:
        if column not in frame.columns:
            raise InputError(path, column, f"a column of a comm table ({', '.join(NEEDED)})")
        values = pd.to_numeric(frame[column], errors="coerce")
        if values.isna().any() or (values <= 0).any() or not np.isfinite(values).all():
            raise InputError(path, column, "finite numbers > 0 on every row")
        frame[column] = values
    return frame


def allreduce_rows(frame: pd.DataFrame, where: str) -> pd.DataFrame:
    """The 16-bit all-reduce rows (graph-captured where the table says how it was timed), with
    payload_bytes and time_us."""
    rows = frame
    if "op_name" in rows.columns:
        rows = rows[rows["op_name"] == "all_reduce"]
    dtype_column = next((c for c in ("nccl_dtype", "allreduce_dtype") if c in rows.columns), None)
    if dtype_column is not None:
        rows = rows[rows[dtype_column].astype(str).isin(SIXTEEN_BIT)]
    if "backend" in rows.columns and rows["backend"].astype(str).str.contains("graph").any():
        rows = rows[rows["backend"].astype(str).str.contains("graph")]
    if rows.empty:
        raise InputError(where, None, "16-bit all_reduce rows (half or bfloat16)")
    return rows.assign(payload_bytes=rows["message_size"] * 2, time_us=rows["latency"] * 1e3)


def tables_by_tp(rows: pd.DataFrame) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """{group size: (payload bytes, median microseconds)} with at least 2 sizes each."""
    out = {}
    for tp, group in rows.groupby("num_gpus"):
        medians = group.groupby("payload_bytes")["time_us"].median().sort_index()
        if len(medians) >= 2 and int(tp) >= 2:
            out[int(tp)] = (medians.index.to_numpy(np.float64), medians.to_numpy(np.float64))
    return out


def write_allreduce_npz(out: Path, kinds: dict[str, dict[int, tuple[np.ndarray, np.ndarray]]], meta: dict) -> int:
    """Write {kind: {tp: (bytes, us)}} to `out` (compressed); returns its size in bytes."""
    arrays = {}
    for kind, by_tp in kinds.items():
        for tp, (payload, time_us) in by_tp.items():
            arrays[f"{kind}_tp{tp}_bytes"] = payload
            arrays[f"{kind}_tp{tp}_time_us"] = time_us.astype(np.float32)
    out.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, meta=np.array(json.dumps(meta, sort_keys=True)), **arrays)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_bytes(buffer.getvalue())
    tmp.replace(out)
    return out.stat().st_size


def import_allreduce_tables(nccl: Path | None, custom: Path | None) -> dict[str, dict]:
    """{kind: {tp: (bytes, us)}} from an nccl_perf and / or a custom_allreduce_perf table."""
    kinds = {}
    for kind, path in (("nccl", nccl), ("custom", custom)):
        if path is not None:
            kinds[kind] = tables_by_tp(allreduce_rows(read_comm_rows(path), str(path)))
    return kinds
