"""The measurements CSV: one row per timed configuration.

Columns (in order; other code depends on exactly these names):

| column | meaning |
|---|---|
| op | qkv_proj, o_proj, gate_up_proj, down_proj, lm_head, decode_attention, prefill_attention, allreduce, send_recv |
| m_tokens | GEMM M / total tokens in the step (optional for allreduce) |
| n_out, k_in | GEMM N and K on one shard (GEMM ops only; empty otherwise) |
| batch_size | sequences (attention ops) |
| context_tokens | mean context per sequence (attention ops; may be fractional) |
| block_size | KV block size (decode_attention only) |
| n_heads, n_kv_heads, head_dim | attention heads on one shard (attention ops) |
| payload_bytes | bytes all-reduced or sent (allreduce, send_recv only) |
| tp | tensor-parallel size (>= 2 for allreduce and send_recv: the GPUs taking part) |
| dtype | bf16, fp16, fp32 or fp8 (fp8: GEMM ops only, e4m3 operands, bf16 output) |
| time_s, time_std_s | median and spread of the repeats, seconds |
| n_repeats | timed repeats behind time_s |
| device, source, torch_version, date | provenance (torch_version may be empty for imported data) |

Optional columns (`OPTIONAL_COLUMNS`; absent in older files and imports, read as empty):

| column | meaning |
|---|---|
| n_experts | experts in one grouped GEMM (experts_gate_up, experts_down: each runs m_tokens rows) |
| v_head_dim | value width (mla_decode_attention: the latent, kv_lora_rank; head_dim is latent + rope) |
| k_in_padded, n_out_padded | K, N the kernel ran when the shape was padded to its alignment (fp8: 16) |
| kernel | kernel class timed (`KERNEL_CLASSES`) |
| timing_mode | what time_s is: cuda_graph (per call from graph replays) or eager |
| time_eager_s, time_eager_std_s | eager per-call median and spread (launch gaps included) |
| time_graph_s, time_graph_std_s | CUDA-graph per-call median and spread; empty where not timed (CPU) |
| graph_launches | calls captured per graph replay |
| l2_state_eager | flushed (L2 overwritten before each call), rotated (input copies >= 2x the cache) or warm |
| l2_state_graph | rotated (copies >= 2x L2) or warm (inputs may be L2-resident) |

The fit reads `PREDICTED_OPS` rows; `UNPREDICTED_OPS` (grouped expert GEMMs, MLA decode) are
timed and kept in the file, and left out of fits and reports with one line until the cost model
predicts them (`split_predicted`).

`validate_measurements` checks a frame against this; `read_measurements` and
`write_measurements` call it, so a bad file fails with one `InputError` line.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pandas as pd

from sim.errors import InputError
from sim.output import staging_file, with_normal_mode
from sim.yamlio import check_regular_file

GEMM_OPS = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj", "lm_head")
# Plain GEMMs of MLA attention and of MoE layers (the simulator's op names, sim/cost/arch.py)
ARCH_GEMM_OPS = ("q_proj", "q_a_proj", "q_b_proj", "kv_a_proj", "kv_b_proj", "router", "shared_gate_up_proj",
                 "shared_down_proj")
GROUPED_GEMM_OPS = ("experts_gate_up", "experts_down")
ATTENTION_OPS = ("decode_attention", "prefill_attention")
MLA_ATTENTION_OPS = ("mla_decode_attention",)
COLLECTIVE_OPS = ("allreduce", "send_recv")
OPS = GEMM_OPS + ARCH_GEMM_OPS + GROUPED_GEMM_OPS + ATTENTION_OPS + MLA_ATTENTION_OPS + COLLECTIVE_OPS
UNPREDICTED_OPS = GROUPED_GEMM_OPS + MLA_ATTENTION_OPS
PREDICTED_OPS = tuple(op for op in OPS if op not in UNPREDICTED_OPS)
# torch_linear / torch_scaled_mm: cuBLAS / cuBLASLt on CUDA; sdpa_*: the SDPA backend that ran
KERNEL_CLASSES = ("torch_linear", "torch_scaled_mm", "torch_bmm", "scaled_mm_per_expert", "triton_split_kv",
                  "torch_paged_reference", "sdpa_flash", "sdpa_efficient", "sdpa_math", "nccl_allreduce")
TIMING_MODES = ("cuda_graph", "eager")
OPTIONAL_INT_COLUMNS = ("n_experts", "v_head_dim", "k_in_padded", "n_out_padded", "graph_launches")
OPTIONAL_FLOAT_COLUMNS = ("time_eager_s", "time_eager_std_s", "time_graph_s", "time_graph_std_s")
OPTIONAL_TEXT_COLUMNS = ("kernel", "timing_mode", "l2_state_eager", "l2_state_graph")
OPTIONAL_COLUMNS = (
    "n_experts", "v_head_dim", "k_in_padded", "n_out_padded", "kernel", "timing_mode", "time_eager_s",
    "time_eager_std_s", "time_graph_s", "time_graph_std_s", "graph_launches", "l2_state_eager", "l2_state_graph",
)  # fmt: skip
_TEXT_VALUES = {"kernel": KERNEL_CLASSES, "timing_mode": TIMING_MODES, "l2_state_eager": ("flushed", "rotated", "warm"),
                "l2_state_graph": ("rotated", "warm")}
# What makes two rows the same configuration: a file must not hold one twice.
KEY_COLUMNS = (
    "op", "m_tokens", "n_out", "k_in", "batch_size", "context_tokens", "block_size",
    "n_heads", "n_kv_heads", "head_dim", "payload_bytes", "tp", "dtype", "device",
)  # fmt: skip
DTYPES = ("bf16", "fp16", "fp32", "fp8")
SOURCE_RUNNER = "infersim-runner"

INT_COLUMNS = (
    "m_tokens", "n_out", "k_in", "batch_size", "block_size",
    "n_heads", "n_kv_heads", "head_dim", "payload_bytes", "tp", "n_repeats",
)  # fmt: skip
FLOAT_COLUMNS = ("context_tokens", "time_s", "time_std_s")
TEXT_COLUMNS = ("op", "dtype", "device", "source", "torch_version", "date")
COLUMNS = (
    "op", "m_tokens", "n_out", "k_in", "batch_size", "context_tokens", "block_size",
    "n_heads", "n_kv_heads", "head_dim", "payload_bytes", "tp", "dtype", "time_s",
    "time_std_s", "n_repeats", "device", "source", "torch_version", "date",
)  # fmt: skip

# Per op: columns that must hold a positive value, and columns that must be empty.
_ATTENTION_FIELDS = ("batch_size", "context_tokens", "n_heads", "n_kv_heads", "head_dim")
_REQUIRED = {
    **{op: ("m_tokens", "n_out", "k_in") for op in GEMM_OPS + ARCH_GEMM_OPS},
    **{op: ("m_tokens", "n_out", "k_in", "n_experts") for op in GROUPED_GEMM_OPS},
    "decode_attention": ("m_tokens", "block_size") + _ATTENTION_FIELDS,
    "mla_decode_attention": ("m_tokens", "block_size", "v_head_dim") + _ATTENTION_FIELDS,
    "prefill_attention": ("m_tokens",) + _ATTENTION_FIELDS,
    "allreduce": ("payload_bytes",),
    "send_recv": ("payload_bytes",),
}
_EMPTY = {
    **{op: ("payload_bytes", "block_size") for op in GEMM_OPS + ARCH_GEMM_OPS + GROUPED_GEMM_OPS},
    "decode_attention": ("n_out", "k_in", "payload_bytes"),
    "mla_decode_attention": ("n_out", "k_in", "payload_bytes"),
    "prefill_attention": ("n_out", "k_in", "payload_bytes", "block_size"),
    "allreduce": ("n_out", "k_in", "block_size"),
    "send_recv": ("n_out", "k_in", "block_size"),
}


def empty_row() -> dict:
    """A row with every column (optional ones too) present and empty (None), to fill in."""
    return dict.fromkeys(COLUMNS + OPTIONAL_COLUMNS)


def _coerce(frame: pd.DataFrame, where: str) -> pd.DataFrame:
    frame = frame.copy()
    for column in INT_COLUMNS + OPTIONAL_INT_COLUMNS + FLOAT_COLUMNS + OPTIONAL_FLOAT_COLUMNS:
        numbers = pd.to_numeric(frame[column], errors="coerce")
        if (numbers.isna() & frame[column].notna()).any():
            raise InputError(where, column, "numbers (or empty)")
        if column in INT_COLUMNS:
            whole = numbers.dropna()
            if not (whole == whole.round()).all():
                raise InputError(where, column, "whole numbers (or empty)")
            numbers = numbers.astype("Int64")
        is_float = column in FLOAT_COLUMNS + OPTIONAL_FLOAT_COLUMNS
        frame[column] = numbers.astype("Float64" if is_float else "Int64")
    for column in TEXT_COLUMNS + OPTIONAL_TEXT_COLUMNS:
        frame[column] = frame[column].astype("string")
    return frame


def _check_values(frame: pd.DataFrame, where: str) -> None:
    bad_op = ~frame["op"].isin(OPS)
    if bad_op.any():
        raise InputError(where, "op", f"one of {', '.join(OPS)}")
    if (~frame["dtype"].isin(DTYPES)).any():
        raise InputError(where, "dtype", f"one of {', '.join(DTYPES)}")
    time_s = frame["time_s"].astype("float64")
    if not (time_s.notna() & (time_s > 0) & time_s.map(math.isfinite)).all():
        raise InputError(where, "time_s", "finite seconds > 0 on every row")
    std_s = frame["time_std_s"].astype("float64")
    if not (std_s.notna() & (std_s >= 0) & std_s.map(math.isfinite)).all():
        raise InputError(where, "time_std_s", "finite seconds >= 0 on every row")
    for column in ("n_repeats", "tp"):
        if not (frame[column].notna() & (frame[column] >= 1)).all():
            raise InputError(where, column, "a whole number >= 1 on every row")
    for column in ("device", "source", "date"):
        if (frame[column].isna() | (frame[column].str.strip() == "")).any():
            raise InputError(where, column, "non-empty text on every row")
    dates = pd.to_datetime(frame["date"], errors="coerce", format="ISO8601", utc=True)
    if dates.isna().any():
        raise InputError(where, "date", "ISO 8601 dates")
    for column, allowed in _TEXT_VALUES.items():
        if (frame[column].notna() & ~frame[column].isin(allowed)).any():
            raise InputError(where, column, f"empty or one of {', '.join(allowed)}")
    for column in OPTIONAL_FLOAT_COLUMNS:
        values = frame[column].astype("float64").dropna()
        if not ((values >= 0) & values.map(math.isfinite)).all():
            raise InputError(where, column, "empty or finite seconds >= 0")


def _check_per_op(frame: pd.DataFrame, where: str) -> None:
    for op, rows in frame.groupby("op", observed=True):
        for column in _REQUIRED[op]:
            if not (rows[column].notna() & (rows[column] > 0)).all():
                raise InputError(where, column, f"a positive value on every {op} row")
        for column in _EMPTY[op]:
            if rows[column].notna().any():
                raise InputError(where, column, f"empty on {op} rows")
    attention = frame[frame["op"].isin(ATTENTION_OPS)]
    if (attention["n_heads"] % attention["n_kv_heads"] != 0).any():
        raise InputError(where, "n_heads", "a multiple of n_kv_heads on attention rows")
    collective = frame[frame["op"].isin(COLLECTIVE_OPS)]
    if (collective["tp"] < 2).any():
        raise InputError(where, "tp", ">= 2 on allreduce and send_recv rows")


def check_no_duplicates(frame: pd.DataFrame, where: str) -> None:
    """One row per configuration (`KEY_COLUMNS`) in one file: a repeat is refused, naming the
    row numbers (1-based data rows), since which of two times is right cannot be told."""
    keys = list(KEY_COLUMNS) + [c for c in ("n_experts", "v_head_dim") if c in frame.columns]
    repeats = frame.duplicated(keys, keep=False)
    if repeats.any():
        rows = [int(i) + 1 for i in frame.index[repeats][:2]]
        raise InputError(where, ",".join(KEY_COLUMNS[:4]) + ",...",
                         f"one row per configuration (data rows {rows[0]} and {rows[1]} repeat one)")


def validate_measurements(frame: pd.DataFrame, where: str) -> pd.DataFrame:
    """Check columns and values; return the frame in schema column order and dtypes.

    Optional columns (`OPTIONAL_COLUMNS`) are kept, added empty when absent; other extra
    columns are dropped. Raises `InputError(where, column, allowed)` on the first
    problem: a missing column, no rows, an unknown op or dtype, a time that is missing,
    NaN, infinite or not positive, a field an op needs left empty (or one it must not
    have filled), an unparsable date.
    """
    missing = [column for column in COLUMNS if column not in frame.columns]
    if missing:
        raise InputError(where, missing[0], f"a CSV with columns {', '.join(COLUMNS)}")
    if frame.empty:
        raise InputError(where, None, "at least one measurement row")
    frame = frame.reindex(columns=list(COLUMNS + OPTIONAL_COLUMNS))
    frame = _coerce(frame, where)
    _check_values(frame, where)
    _check_per_op(frame, where)
    return frame.reset_index(drop=True)


def split_predicted(frame: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]]:
    """(rows of ops the cost model predicts, {op: rows left out}) for fits and reports."""
    left_out = frame["op"].isin(UNPREDICTED_OPS)
    counts = frame.loc[left_out, "op"].astype(str).value_counts().sort_index()
    return frame[~left_out].reset_index(drop=True), {op: int(n) for op, n in counts.items()}


def read_measurements(path: str | os.PathLike) -> pd.DataFrame:
    """Read and validate a measurements CSV; bad files raise `InputError(path, ...)`."""
    where = str(path)
    if os.path.exists(path):
        check_regular_file(path)  # before pandas opens it: a FIFO would block, /dev/zero never end
    try:
        frame = pd.read_csv(path, dtype={column: "string" for column in TEXT_COLUMNS + OPTIONAL_TEXT_COLUMNS})
    except FileNotFoundError:
        raise InputError(where, None, "an existing measurements CSV file") from None
    except pd.errors.EmptyDataError:
        raise InputError(where, None, "a CSV with a header row and measurements") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as error:
        allowed = f"a readable UTF-8 CSV ({type(error).__name__})"
        raise InputError(where, None, allowed) from None
    frame = validate_measurements(frame, where)
    check_no_duplicates(frame, where)
    return frame


def write_measurements(frame: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Validate, then write atomically (temp file in the same folder, then rename)."""
    target = Path(path)
    frame = validate_measurements(frame, str(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp_name = staging_file(target)  # `.NAME.partial-PID-*`: a killed run's is removed by the next
    try:
        with open(tmp_name, "w", newline="") as tmp_file:
            frame.to_csv(tmp_file, index=False)
        with_normal_mode(tmp_name)  # not mkstemp's 0600
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return target
