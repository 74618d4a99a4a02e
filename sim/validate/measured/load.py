"""Which per-request format a file is, by content (not by name), and reading it."""

from __future__ import annotations

import json
from pathlib import Path

from sim.errors import InputError
from sim.validate.measured.aiperf import is_aiperf_record, read_aiperf
from sim.validate.measured.otlp import is_otlp, read_otlp
from sim.validate.measured.run import MeasuredRun
from sim.validate.measured.vllm_bench import is_vllm_bench, read_vllm_bench
from sim.yamlio import MAX_DOCUMENT_BYTES, loads_json, parse_json, read_bytes_bounded

FORMATS = ("vllm_bench", "aiperf", "otlp")


def _first_document(path: Path):
    """The whole file as JSON, else its first non-blank line as JSON, else None."""
    try:
        text = read_bytes_bounded(path, MAX_DOCUMENT_BYTES).decode("utf-8")
    except UnicodeDecodeError:
        return None, None
    try:
        return loads_json(text, path), True
    except json.JSONDecodeError:
        pass
    for line_no, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                return loads_json(line, f"{path}:{line_no}"), False
            except json.JSONDecodeError as exc:
                if Path(path).suffix.lower() == ".jsonl":  # meant as JSON lines: say where it breaks
                    raise InputError(f"{path}:{line_no}", None, f"not a JSON record ({exc.msg})") from None
                return None, None
    return None, None


def measured_format(path: Path) -> str | None:
    """vllm_bench | aiperf | otlp when `path` holds per-request measurements, else None
    (an aggregate-only `vllm bench serve` JSON, a validation CSV, anything else)."""
    if Path(path).suffix.lower() == ".csv":
        return None
    document, whole = _first_document(path)
    if whole and is_vllm_bench(document):
        return "vllm_bench"
    if is_otlp(document):
        return "otlp"
    if is_aiperf_record(document):
        return "aiperf"
    return None


def load_measured(path: Path) -> MeasuredRun:
    """Read a per-request measurement file; InputError (one line) when it is none of the formats."""
    path = Path(path)
    fmt = measured_format(path)
    if fmt == "vllm_bench":
        return read_vllm_bench(path, parse_json(read_bytes_bounded(path, MAX_DOCUMENT_BYTES), path))
    if fmt == "aiperf":
        return read_aiperf(path)
    if fmt == "otlp":
        return read_otlp(path)
    raise InputError(path, None, "not a per-request measurement file: expected a `vllm bench serve --save-result "
                                 "--save-detailed` JSON, an AIPerf profile_export.jsonl or OTLP JSON request spans")
