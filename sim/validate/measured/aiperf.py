"""AIPerf `profile_export.jsonl`: one JSON record per request, one record per line.

Record layout as ai-dynamo/aiperf documents it (docs/tutorials/working-with-profile-exports.md,
read at commit 13992dbd96879c76e9584f2e8dc05db49bee6cf2; models in
src/aiperf/common/models/record_models.py): `metadata` (`request_start_ns`: epoch ns when the
request was sent; `benchmark_phase`; `was_cancelled`), `metrics` (each `{"value", "unit"}`:
`input_sequence_length` and `output_sequence_length` in tokens, `time_to_first_token` and
`request_latency` in a time unit), `error` (null on success). Failed, cancelled and
non-profiling (warm-up) records are left out; records without an output length are refused.
"""

from __future__ import annotations

import json
from pathlib import Path

from sim.errors import InputError
from sim.inputs.budget import MAX_TIME_S
from sim.validate.measured.run import MeasuredRun, build_run, count, nanoseconds, number, seconds_since_first
from sim.yamlio import MAX_DOCUMENT_BYTES, loads_json, read_text_bounded

TIME_UNIT_S = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0}
OUTPUT_LENGTH_KEYS = ("output_sequence_length", "output_token_count")


def is_aiperf_record(record) -> bool:
    return isinstance(record, dict) and "metadata" in record and "metrics" in record


def _metric(where: str, metrics: dict, key: str) -> dict:
    item = metrics.get(key)
    if not isinstance(item, dict) or "value" not in item or "unit" not in item:
        raise InputError(where, f"metrics.{key}", "required, as {\"value\": number, \"unit\": text}")
    return item


def _seconds(where: str, metrics: dict, key: str) -> float:
    item = _metric(where, metrics, key)
    unit = item["unit"]
    if not isinstance(unit, str) or unit not in TIME_UNIT_S:
        raise InputError(where, f"metrics.{key}.unit", f"must be one of {', '.join(TIME_UNIT_S)} (got {unit!r})")
    return number(where, f"metrics.{key}.value", item["value"], strict=True,
                  maximum=MAX_TIME_S / TIME_UNIT_S[unit]) * TIME_UNIT_S[unit]


def _tokens(where: str, metrics: dict, key: str) -> int:
    item = _metric(where, metrics, key)
    if item["unit"] != "tokens":
        raise InputError(where, f"metrics.{key}.unit", f"must be tokens (got {item['unit']!r})")
    return count(where, f"metrics.{key}.value", item["value"])


def _failed(where: str, record: dict) -> bool:
    meta = record["metadata"]
    if not isinstance(meta, dict):
        raise InputError(where, "metadata", "must be an object")
    if meta.get("benchmark_phase", "profiling") != "profiling":
        return True  # warm-up records are not part of the measured run
    return record.get("error") is not None or meta.get("was_cancelled") is True


def _record(where: str, record: dict) -> tuple[int, int, int, float, float]:
    metrics = record["metrics"]
    if not isinstance(metrics, dict):
        raise InputError(where, "metrics", "must be an object")
    out_key = next((k for k in OUTPUT_LENGTH_KEYS if k in metrics), OUTPUT_LENGTH_KEYS[0])
    start_ns = nanoseconds(where, "metadata.request_start_ns", record["metadata"].get("request_start_ns"))
    return (start_ns, _tokens(where, metrics, "input_sequence_length"), _tokens(where, metrics, out_key),
            _seconds(where, metrics, "time_to_first_token"), _seconds(where, metrics, "request_latency"))


def read_aiperf(path: Path) -> MeasuredRun:
    """The successful profiling-phase records, in file order; InputError names the line."""
    rows, n_failed = [], 0
    lines = read_text_bounded(path, MAX_DOCUMENT_BYTES).splitlines()
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{line_no}"
        try:
            record = loads_json(line, where)
        except json.JSONDecodeError as exc:
            raise InputError(where, None, f"not a JSON record ({exc.msg})") from None
        if not is_aiperf_record(record):
            raise InputError(where, None, "must be an AIPerf record with `metadata` and `metrics`")
        if _failed(where, record):
            n_failed += 1
            continue
        rows.append(_record(where, record))
    columns = list(zip(*rows)) if rows else [[]] * 5
    return build_run(path, "aiperf", seconds_since_first(list(columns[0])), *columns[1:], n_left_out=n_failed)
