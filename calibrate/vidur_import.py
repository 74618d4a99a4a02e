"""Vidur's profiling CSVs as measurements, and reading any mix of measurement files.

Vidur (github.com/microsoft/vidur, MIT) publishes per-operator GPU timings:
- `mlp.csv`: one row per (num_tokens, num_tensor_parallel_workers) with
  `time_stats.<op>.median` / `.std` in **milliseconds**; the four projection GEMMs become our
  GEMM ops (attn_pre_proj -> qkv_proj, attn_post_proj -> o_proj, mlp_up_proj -> gate_up_proj,
  mlp_down_proj -> down_proj), shaped per TP shard from n_head, n_kv_head, n_embd,
  n_expanded_embd and use_gated_mlp. Its other ops (norms, rope, activation) are not ours.
- `all_reduce.csv` / `send_recv.csv`: `size` is the payload in **bytes**, `num_workers` the group
  size; rows whose `devices_per_node` is below the group (all-reduce) or 1 (send/recv) cross nodes
  and are left out: the profiles model one node.
- A few (num_tokens, TP) or (size, workers) keys appear twice with different times; the importer
  keeps the median of the repeats (Vidur's own loader keeps them all), so a file yields one row per
  configuration.

Neither file records dtype, repeat count or date: imported rows say fp16, n_repeats 1 (a lower
bound) and the date of the Vidur commit the bundled copies come from (calibrate/data/vidur/PROVENANCE.md).
`read_measurement_files` sniffs each file's header and returns one validated frame.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from calibrate.measurements import COLUMNS, KEY_COLUMNS, read_measurements, validate_measurements
from sim.errors import InputError
from sim.yamlio import check_regular_file

VIDUR_GEMM_OPS = {
    "attn_pre_proj": "qkv_proj",
    "attn_post_proj": "o_proj",
    "mlp_up_proj": "gate_up_proj",
    "mlp_down_proj": "down_proj",
}
MLP_SHAPE_COLUMNS = ("n_head", "n_kv_head", "n_embd", "n_expanded_embd", "use_gated_mlp")
MLP_KEY_COLUMNS = ("num_tokens", "num_tensor_parallel_workers")
ALLREDUCE_COLUMNS = ("num_workers", "size", "time_stats.all_reduce.median", "time_stats.all_reduce.std")
SEND_RECV_COLUMNS = ("num_workers", "size", "time_stats.send_recv.median", "time_stats.send_recv.std")
VIDUR_DTYPE = "fp16"
VIDUR_DATE = "2024-11-19"  # commit 7d47513 of microsoft/vidur, where the bundled copies come from
BUNDLED_DIR = Path(__file__).resolve().parent / "data" / "vidur"
OUR_FORMAT = "a measurements CSV (calibrate/measurements.py columns), a Vidur mlp.csv, all_reduce.csv or send_recv.csv"


def _require(frame: pd.DataFrame, columns, where: str, what: str) -> None:
    for column in columns:
        if column not in frame.columns:
            raise InputError(where, column, f"a column of {what}")
    if frame.empty:
        raise InputError(where, None, f"at least one row in {what}")


def _numbers(frame: pd.DataFrame, columns, where: str) -> pd.DataFrame:
    out = {}
    for column in columns:
        values = pd.to_numeric(frame[column], errors="coerce")
        if values.isna().any():
            raise InputError(where, column, "numbers on every row")
        out[column] = values
    return pd.DataFrame(out)


def _device_from_path(path: Path) -> str:
    """`h100` from .../compute/h100/<org>/<model>/mlp.csv, `h100_dgx` from .../network/h100_dgx/...;
    else the folder name, so a renamed copy still says where it came from."""
    parts = path.resolve().parts
    for marker in ("compute", "network"):
        if marker in parts[:-1]:
            return f"vidur:{parts[parts.index(marker) + 1]}"
    return f"vidur:{path.parent.name or 'unknown'}"


def _provenance(path: Path) -> dict:
    return {
        "device": _device_from_path(path),
        "source": f"vidur:{path.name}",
        "torch_version": None,
        "date": VIDUR_DATE,
        "dtype": VIDUR_DTYPE,
        "n_repeats": 1,
    }


def shard_shape(op: str, n_heads: int, n_kv_heads: int, hidden: int, mlp: int, gated: bool, tp: int):
    """(n_out, k_in) of Vidur op `op` on one of `tp` shards (one replicated KV head when n_kv < tp)."""
    head_dim = hidden // n_heads
    q_heads, kv_heads, mlp_shard = n_heads // tp, max(1, n_kv_heads // tp), mlp // tp
    return {
        "attn_pre_proj": ((q_heads + 2 * kv_heads) * head_dim, hidden),
        "attn_post_proj": (hidden, q_heads * head_dim),
        "mlp_up_proj": ((2 if gated else 1) * mlp_shard, hidden),
        "mlp_down_proj": (hidden, mlp_shard),
    }[op]


def _check_mlp_shapes(numbers: pd.DataFrame, where: str) -> None:
    """Shapes are whole positive numbers that split evenly: heads over KV heads and TP, hidden over heads."""
    for column in MLP_SHAPE_COLUMNS[:-1] + MLP_KEY_COLUMNS:
        values = numbers[column]
        if not ((values >= 1) & (values == values.round()) & (values < 2**31)).all():
            raise InputError(where, column, "whole numbers >= 1 on every row")
    relations = (("n_head", "n_kv_head"), ("n_embd", "n_head"), ("n_head", "num_tensor_parallel_workers"),
                 ("n_expanded_embd", "num_tensor_parallel_workers"))
    for column, divisor in relations:
        if (numbers[column].astype("int64") % numbers[divisor].astype("int64")).any():
            raise InputError(where, column, f"a multiple of {divisor} on every row")


def import_vidur_mlp(frame: pd.DataFrame, path: Path) -> pd.DataFrame:
    """Our measurement rows (four GEMM ops per CSV row) from a Vidur mlp.csv frame."""
    where = str(path)
    time_columns = [f"time_stats.{op}.{stat}" for op in VIDUR_GEMM_OPS for stat in ("median", "std")]
    _require(frame, MLP_SHAPE_COLUMNS + MLP_KEY_COLUMNS + tuple(time_columns), where, "a Vidur mlp.csv")
    frame = frame.drop_duplicates()
    numbers = _numbers(frame, MLP_SHAPE_COLUMNS[:-1] + MLP_KEY_COLUMNS + tuple(time_columns), where)
    _check_mlp_shapes(numbers, where)
    gated = frame["use_gated_mlp"].astype(str).str.lower().isin(("true", "1"))
    base = _provenance(path)
    rows = []
    for (_, row), is_gated in zip(numbers.iterrows(), gated, strict=True):
        tp = int(row["num_tensor_parallel_workers"])
        dims = (int(row["n_head"]), int(row["n_kv_head"]), int(row["n_embd"]), int(row["n_expanded_embd"]))
        for vidur_op, op in VIDUR_GEMM_OPS.items():
            n_out, k_in = shard_shape(vidur_op, *dims, is_gated, tp)
            rows.append(base | {
                "op": op, "m_tokens": int(row["num_tokens"]), "n_out": n_out, "k_in": k_in, "tp": tp,
                "time_s": row[f"time_stats.{vidur_op}.median"] * 1e-3,
                "time_std_s": row[f"time_stats.{vidur_op}.std"] * 1e-3,
            })  # fmt: skip
    return validate_measurements(median_of_repeats(pd.DataFrame(rows, columns=list(COLUMNS))), where)


def median_of_repeats(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration (`KEY_COLUMNS`): the median time of repeated keys."""
    keys = list(KEY_COLUMNS)
    if not frame.duplicated(keys).any():
        return frame
    grouped = frame.groupby(keys, dropna=False, sort=False)
    first = grouped.first().reset_index()
    first["time_s"] = grouped["time_s"].median().to_numpy()
    return first.reindex(columns=list(COLUMNS))


def import_vidur_collective(frame: pd.DataFrame, path: Path, op: str) -> pd.DataFrame:
    """Our `allreduce` / `send_recv` rows from a Vidur all_reduce.csv / send_recv.csv frame
    (payload in bytes, time in ms); cross-node rows left out."""
    where = str(path)
    vidur_op = "all_reduce" if op == "allreduce" else "send_recv"
    columns = ALLREDUCE_COLUMNS if op == "allreduce" else SEND_RECV_COLUMNS
    _require(frame, columns, where, f"a Vidur {vidur_op}.csv")
    frame = frame.drop_duplicates()
    numbers = _numbers(frame, columns, where)
    if "devices_per_node" in frame.columns:
        per_node = pd.to_numeric(frame["devices_per_node"], errors="coerce")
        in_node = per_node >= numbers["num_workers"] if op == "allreduce" else per_node > 1
        numbers = numbers[in_node.to_numpy()]
        if numbers.empty:
            raise InputError(where, "devices_per_node", "at least one row within one node")
    rows = pd.DataFrame({
        "op": op, "payload_bytes": numbers["size"], "tp": numbers["num_workers"],
        "time_s": numbers[f"time_stats.{vidur_op}.median"] * 1e-3,
        "time_std_s": numbers[f"time_stats.{vidur_op}.std"] * 1e-3,
    })  # fmt: skip
    for column, value in _provenance(path).items():
        rows[column] = value
    return validate_measurements(median_of_repeats(rows.reindex(columns=list(COLUMNS))), where)


def _read_header(path: Path) -> list[str]:
    if path.exists():
        check_regular_file(path)  # before any open: a FIFO would block it, /dev/zero never ends
    try:
        with open(path, encoding="utf-8") as handle:
            first = handle.readline()
    except FileNotFoundError:
        raise InputError(path, None, "an existing measurements file") from None
    except (UnicodeDecodeError, IsADirectoryError, PermissionError):
        raise InputError(path, None, f"a readable UTF-8 CSV: {OUR_FORMAT}") from None
    return [name.strip() for name in first.rstrip("\r\n").split(",")]


def _read_csv(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as error:
        raise InputError(path, None, f"a readable CSV ({type(error).__name__})") from None


def read_measurement_file(path: str | os.PathLike) -> pd.DataFrame:
    """One file of any supported kind, sniffed by its header row, as a validated frame."""
    path = Path(path)
    header = set(_read_header(path))
    if "op" in header and "time_s" in header:
        return read_measurements(path)
    if "time_stats.attn_pre_proj.median" in header:
        return import_vidur_mlp(_read_csv(path), path)
    if "time_stats.all_reduce.median" in header:
        return import_vidur_collective(_read_csv(path), path, "allreduce")
    if "time_stats.send_recv.median" in header:
        return import_vidur_collective(_read_csv(path), path, "send_recv")
    raise InputError(path, None, f"a header row of {OUR_FORMAT}")


def read_measurement_files(paths) -> pd.DataFrame:
    """Every file in `paths` (at least one), concatenated into one validated frame."""
    paths = list(paths)
    if not paths:
        raise InputError("MEASUREMENTS", None, "at least one measurements file")
    frames = [read_measurement_file(path) for path in paths]
    return validate_measurements(pd.concat(frames, ignore_index=True), ", ".join(map(str, paths)))


def bundled_vidur_path(relative: str) -> Path:
    """A bundled Vidur file, e.g. `compute/h100/meta-llama/Llama-2-7b-hf/mlp.csv`."""
    return BUNDLED_DIR / relative
