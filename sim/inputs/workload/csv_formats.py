"""CSV trace formats: Azure LLM inference (2023/2024), Vidur/Splitwise, length-only
stats (ShareGPT/arXiv), BurstGPT and a generic CSV with a column mapping.

Files stream through `pyarrow.csv.open_csv` in blocks, so memory holds one block plus
the growing numpy columns, never a Python object per row.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from sim.errors import InputError
from sim.inputs.workload.adapter_names import adapter_column, adapter_extra
from sim.inputs.workload.columns import ChunkedColumn, build_trace, checked_lengths, checked_times, generic_column_names
from sim.inputs.workload.trace import Trace
from sim.yamlio import check_regular_file

TIME_UNIT_S = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
_BLOCK_BYTES = 1 << 22


@dataclass(frozen=True)
class CsvSchema:
    """Which columns hold a request's arrival time and lengths, and how time is written."""

    prompt: str
    output: str
    time: str | None = None  # None: length-only file, arrivals come from elsewhere
    time_is_wallclock: bool = False  # text timestamps (Azure) instead of numbers
    time_scale_s: float = 1.0
    failed_marker: str | None = None  # BurstGPT: rows with zero output are failures
    adapter_map: dict | None = None  # the spec's `columns` (its `adapter` key names the adapter column)


CSV_SCHEMAS = {
    "azure": CsvSchema("ContextTokens", "GeneratedTokens", "TIMESTAMP", time_is_wallclock=True),
    "splitwise": CsvSchema("num_prefill_tokens", "num_decode_tokens", "arrived_at"),
    "lengths": CsvSchema("num_prefill_tokens", "num_decode_tokens"),
    "burstgpt": CsvSchema("Request tokens", "Response tokens", "Timestamp", failed_marker="zero"),
}


def generic_csv_schema(columns: dict[str, str] | None, time_unit: str) -> CsvSchema:
    """A schema from a mapping of our fields (arrival_s, prompt_tokens, output_tokens)
    to the file's column names; unmapped fields keep our names."""
    names = generic_column_names(columns)
    return CsvSchema(
        names["prompt_tokens"],
        names["output_tokens"],
        names["arrival_s"],
        time_scale_s=TIME_UNIT_S[time_unit],
        adapter_map=dict(columns or {}),
    )


def read_header(path: Path) -> list[str]:
    check_regular_file(path)  # before any open: a FIFO would block it, /dev/zero never ends
    with open(path, newline="", encoding="utf-8-sig", errors="replace") as handle:  # -sig: drop a BOM
        header = next(csv.reader(handle), [])
    return [name.strip() for name in header]


def _first_bad_row(path: Path, column: str) -> str:
    """Slow path, errors only: find the first row whose `column` is not a number."""
    with open(path, newline="", encoding="utf-8-sig", errors="replace") as handle:
        for row_no, row in enumerate(csv.DictReader(handle), 1):
            try:
                float(row.get(column) or "nan")
            except ValueError:
                return f"must be a number; row {row_no} has {row[column]!r}"
    return "must be a number in every row"


def _open_batches(path: Path, header: list[str], schema: CsvSchema, adapter: str | None = None):
    wanted = [c for c in (schema.time, schema.prompt, schema.output, adapter) if c]
    for name in wanted:
        if name not in header:
            raise InputError(str(path), name, f"missing column; the header has {header}")
    types = {schema.prompt: pa.float64(), schema.output: pa.float64()}
    if schema.time:
        types[schema.time] = pa.timestamp("ns") if schema.time_is_wallclock else pa.float64()
    if adapter:
        types[adapter] = pa.string()
    reader = pacsv.open_csv(
        path,
        read_options=pacsv.ReadOptions(block_size=_BLOCK_BYTES, use_threads=False),
        convert_options=pacsv.ConvertOptions(include_columns=wanted, column_types=types),
    )
    yield from reader


def _explain_arrow_error(path: Path, header: list[str], error: pa.ArrowInvalid) -> InputError:
    message = str(error)
    match = re.search(r"CSV column #(\d+)", message)
    if match and int(match.group(1)) < len(header):
        column = header[int(match.group(1))]
        return InputError(str(path), column, _first_bad_row(path, column))
    return InputError(str(path), None, f"not a readable CSV trace ({message.splitlines()[0]})")


_NUMPY_DTYPES = {
    pa.int8(): np.int8, pa.int16(): np.int16, pa.int32(): np.int32, pa.int64(): np.int64,
    pa.uint8(): np.uint8, pa.uint16(): np.uint16, pa.uint32(): np.uint32, pa.uint64(): np.uint64,
    pa.float32(): np.float32, pa.float64(): np.float64,
}


def column_values(column: pa.Array) -> np.ndarray:
    """A column's values as numpy. Numbers without nulls are read in place from the Arrow buffer
    (what `to_numpy` returns for them, without the pandas import, ~0.2 s, that Arrow's own
    conversion makes on first use); anything else goes through `to_numpy`."""
    dtype = _NUMPY_DTYPES.get(column.type)
    if dtype is None or column.null_count:
        return column.to_numpy(zero_copy_only=False)
    return np.frombuffer(column.buffers()[1], dtype=dtype, count=len(column),
                         offset=column.offset * np.dtype(dtype).itemsize)


def load_csv(
    path: Path,
    schema: CsvSchema,
    *,
    strict: bool,
    keep_failed: bool = False,
    make_arrivals_s: Callable[[int], np.ndarray] | None = None,
) -> Trace:
    """Read a CSV trace. Length-only schemas call `make_arrivals_s(n_rows)` for their
    arrival times (an arrival process chosen by the caller) or fail without one. BurstGPT rows with zero
    response tokens (failed requests) are dropped unless `keep_failed`; kept ones get
    one output token (the engine's request needs one) and `extra["failed"]` is True."""
    where = str(path)
    header = read_header(path)
    if not header:
        raise InputError(where, None, "empty file; expected a CSV header and data rows")
    repeated = sorted({name for name in header if header.count(name) > 1})
    if repeated:
        raise InputError(where, repeated[0], "column given twice; give each column once")
    times, prompts, outputs = (
        ChunkedColumn(np.float64),
        ChunkedColumn(np.int64),
        ChunkedColumn(np.int64),
    )
    origin_ns: int | None = None
    first_row = 1
    adapter = adapter_column(header, schema.adapter_map) if schema.adapter_map is not None else None
    names: list = []
    try:
        for batch in _open_batches(path, header, schema, adapter):
            if adapter:
                names += batch.column(adapter).to_pylist()
            n_rows = batch.num_rows
            columns = {
                name: column_values(batch.column(name))
                for name in batch.schema.names
            }
            minimum_output = 0 if schema.failed_marker else 1
            prompts.append(checked_lengths(columns[schema.prompt], where, schema.prompt, first_row))
            outputs.append(
                checked_lengths(
                    columns[schema.output], where, schema.output, first_row, minimum_output
                )
            )
            if schema.time and schema.time_is_wallclock:
                ns = columns[schema.time]
                if np.isnat(ns).any():
                    bad = first_row + int(np.argmax(np.isnat(ns)))
                    raise InputError(where, schema.time, f"missing timestamp at row {bad}")
                ns = ns.astype("datetime64[ns]").astype(np.int64)
                origin_ns = int(ns[0]) if origin_ns is None else origin_ns
                times.append((ns - origin_ns) / 1e9)
            elif schema.time:
                times.append(
                    checked_times(columns[schema.time], where, schema.time, first_row)
                    * schema.time_scale_s
                )
            first_row += n_rows
    except pa.ArrowInvalid as error:
        raise _explain_arrow_error(path, header, error) from None
    prompt_tokens, output_tokens = prompts.join(), outputs.join()
    extra = adapter_extra(names)
    if schema.failed_marker:
        failed = output_tokens == 0
        if keep_failed:
            extra["failed"] = failed
            output_tokens = np.maximum(output_tokens, 1)
    if schema.time is None:
        if make_arrivals_s is None:
            raise InputError(where, "arrival", "a length-only trace needs an arrival process")
        arrival_s = np.asarray(make_arrivals_s(len(prompt_tokens)), dtype=np.float64)
    else:
        arrival_s = times.join()
    if schema.failed_marker and not keep_failed:
        keep = output_tokens > 0
        arrival_s, prompt_tokens, output_tokens = (
            arrival_s[keep],
            prompt_tokens[keep],
            output_tokens[keep],
        )
    return build_trace(
        where=where,
        time_field=schema.time or "arrival",
        arrival_s=arrival_s,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        strict=strict,
        extra=extra,
    )
