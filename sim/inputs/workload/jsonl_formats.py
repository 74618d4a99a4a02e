"""JSONL trace formats: Mooncake, Qwen-Bailian, our canonical format and generic JSONL.

Lines are parsed one at a time into short Python lists that are turned into numpy
chunks every `CHUNK_ROWS` rows, so a large file costs its numpy columns plus one chunk.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sim.errors import InputError
from sim.inputs.workload.adapter_names import ADAPTER_COLUMNS, adapter_extra
from sim.inputs.workload.columns import (
    ChunkedColumn,
    build_trace,
    checked_lengths,
    checked_times,
    generic_column_names,
    numeric_array,
    ragged_offsets,
)
from sim.inputs.workload.trace import Trace
from sim.yamlio import loads_json, open_regular_file

CHUNK_ROWS = 65536
MAX_LINE_BYTES = 16 << 20  # a request's line, hash ids included (10^7 tokens in 16-token blocks: ~6 MB)


@dataclass(frozen=True)
class JsonlSchema:
    """Keys of one JSON line and the units they use."""

    time: str
    prompt: str
    output: str
    time_scale_s: float = 1.0
    hash_ids: str | None = None
    hash_block_tokens: int | None = None  # None: read from each line's `hash_block_tokens`
    n_samples: str | None = None
    extras: tuple[str, ...] = ()
    rebase_time: bool = True  # shift so the earliest request arrives at 0 s
    adapter_keys: tuple[str, ...] = ()  # keys naming a request's LoRA adapter (sim.inputs.workload.adapter_names)


JSONL_SCHEMAS = {
    "mooncake": JsonlSchema("timestamp", "input_length", "output_length", 1e-3, "hash_ids", 512),
    "qwen": JsonlSchema(
        "timestamp",
        "input_length",
        "output_length",
        1.0,
        "hash_ids",
        16,
        extras=("chat_id", "parent_chat_id", "turn"),
    ),
    "canonical": JsonlSchema(
        "arrival_s",
        "prompt_tokens",
        "output_tokens",
        1.0,
        "hash_ids",
        None,
        "n",
        extras=("session_id", "turn", "adapter", "adapter_rank"),
        rebase_time=False,
    ),
}


def generic_jsonl_schema(columns: dict[str, str] | None, time_scale_s: float) -> JsonlSchema:
    names = generic_column_names(columns)
    return JsonlSchema(
        names["arrival_s"],
        names["prompt_tokens"],
        names["output_tokens"],
        time_scale_s,
        hash_ids=names.get("hash_ids"),
        adapter_keys=(names["adapter"],) if "adapter" in names else ADAPTER_COLUMNS,
    )


@dataclass
class _Chunk:
    """Rows parsed since the last flush, as plain lists."""

    lines: list[int] = field(default_factory=list)
    values: dict[str, list] = field(default_factory=dict)
    hash_flat: list = field(default_factory=list)
    hash_lengths: list[int] = field(default_factory=list)


def _integer_ids(values: list, where: str, field: str) -> np.ndarray:
    """Hash ids as int64 (exact: ids may be 64-bit hashes, so never via float)."""
    if not values:
        return np.empty(0, dtype=np.int64)
    try:
        ids = np.array(values)
    except (ValueError, OverflowError):
        ids = np.empty(0, dtype=object)
    if ids.ndim != 1 or ids.dtype.kind not in "iu" or any(type(v) is bool for v in values):
        raise InputError(where, field, "must be lists of integers")
    return ids.astype(np.int64)


class _JsonlReader:
    def __init__(self, path: Path, schema: JsonlSchema) -> None:
        self.where, self.schema = str(path), schema
        self.keys = [schema.time, schema.prompt, schema.output, *schema.extras]
        if schema.n_samples:
            self.keys.append(schema.n_samples)
        self.columns = {key: ChunkedColumn(np.float64) for key in self.keys}
        self.hash_flat, self.hash_lengths = ChunkedColumn(np.int64), ChunkedColumn(np.int64)
        self.block_tokens: set[int] = set()
        self.present: dict[str, bool] = {}
        self.adapter_names: list = []

    def _parse(self, raw: bytes, line_no: int) -> dict:
        try:
            row = loads_json(raw, f"{self.where}:{line_no}")
        except json.JSONDecodeError:
            raise InputError(
                f"{self.where}:{line_no}", None, "not valid JSON; one object per line"
            ) from None
        if not isinstance(row, dict):
            raise InputError(f"{self.where}:{line_no}", None, "each line must be a JSON object")
        return row

    def _add(self, chunk: _Chunk, row: dict, line_no: int) -> None:
        chunk.lines.append(line_no)
        if self.schema.adapter_keys:
            self.adapter_names.append(next((row[k] for k in self.schema.adapter_keys if row.get(k) is not None), None))
        for key in self.keys:
            value = row.get(key)
            chunk.values.setdefault(key, []).append(value)
            had = self.present.setdefault(key, value is not None)
            optional = key in self.schema.extras or key == self.schema.n_samples
            if optional and had != (value is not None):
                raise InputError(f"{self.where}:{line_no}", key, "must be on every line or on none")
        if self.schema.hash_ids:
            ids = row.get(self.schema.hash_ids, [])
            if not isinstance(ids, list):
                raise InputError(
                    f"{self.where}:{line_no}", self.schema.hash_ids, "must be a list of ints"
                )
            chunk.hash_flat.extend(ids)
            chunk.hash_lengths.append(len(ids))
            if self.schema.hash_block_tokens is None and "hash_block_tokens" in row:
                self.block_tokens.add(row["hash_block_tokens"])

    def _flush(self, chunk: _Chunk) -> None:
        optional = {*self.schema.extras, self.schema.n_samples}
        for key in self.keys:
            if key in optional and not self.present.get(key):
                continue
            values = numeric_array(chunk.values[key], self.where, key, chunk.lines, "line")
            self.columns[key].append(values)
        if self.schema.hash_ids:
            self.hash_flat.append(_integer_ids(chunk.hash_flat, self.where, self.schema.hash_ids))
            self.hash_lengths.append(chunk.hash_lengths)

    def read(self) -> None:
        chunk = _Chunk()
        with open_regular_file(self.where) as handle:
            for line_no, raw in enumerate(iter(lambda: handle.readline(MAX_LINE_BYTES + 1), b""), 1):
                if len(raw) > MAX_LINE_BYTES:  # one request per line: a line this long is not a trace
                    raise InputError(f"{self.where}:{line_no}", None, f"line longer than {MAX_LINE_BYTES >> 20} MiB; "
                                                                      "one request per line")
                if raw.strip():
                    self._add(chunk, self._parse(raw, line_no), line_no)
                if len(chunk.lines) >= CHUNK_ROWS:
                    self._flush(chunk)
                    chunk = _Chunk()
        if chunk.lines:
            self._flush(chunk)


def _hash_block_tokens(reader: _JsonlReader, has_ids: bool) -> int | None:
    if reader.schema.hash_block_tokens is not None or not has_ids:
        return reader.schema.hash_block_tokens
    if len(reader.block_tokens) != 1:
        raise InputError(
            reader.where,
            "hash_block_tokens",
            f"one positive integer for the whole file; saw {sorted(reader.block_tokens)}",
        )
    (block,) = reader.block_tokens
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise InputError(
            reader.where, "hash_block_tokens", f"must be a positive integer; got {block!r}"
        )
    return block


def load_jsonl(path: Path, schema: JsonlSchema, *, strict: bool) -> Trace:
    """Read a JSONL trace into a Trace (hash ids kept when the format has them)."""
    reader = _JsonlReader(path, schema)
    reader.read()
    where = str(path)
    first = reader.columns[schema.time].join()
    if len(first) == 0:
        raise InputError(where, None, "empty file; expected one JSON object per line")
    arrival_s = checked_times(first, where, schema.time, 1) * schema.time_scale_s
    prompt = checked_lengths(reader.columns[schema.prompt].join(), where, schema.prompt, 1)
    output = checked_lengths(reader.columns[schema.output].join(), where, schema.output, 1)
    n_samples = None
    if schema.n_samples and reader.present.get(schema.n_samples):
        n_samples = checked_lengths(
            reader.columns[schema.n_samples].join(), where, schema.n_samples, 1
        )
    extra = {
        key: reader.columns[key].join().astype(np.int64)
        for key in schema.extras
        if reader.present.get(key)
    }
    extra.update(adapter_extra(reader.adapter_names))
    flat = offsets = None
    lengths = reader.hash_lengths.join()
    has_ids = bool(schema.hash_ids) and lengths.sum() > 0
    if has_ids:
        flat, offsets = reader.hash_flat.join(), ragged_offsets(lengths)
    return build_trace(
        where=where,
        time_field=schema.time,
        arrival_s=arrival_s,
        prompt_tokens=prompt,
        output_tokens=output,
        strict=strict,
        n_samples=n_samples,
        hash_ids_flat=flat,
        hash_offsets=offsets,
        hash_block_tokens=_hash_block_tokens(reader, has_ids),
        rebase_time=schema.rebase_time,
        extra=extra,
    )
