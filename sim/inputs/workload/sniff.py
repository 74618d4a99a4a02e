"""Guess a trace's format from its first bytes: the CSV header or the first JSON line's keys."""

from __future__ import annotations

import codecs
import csv
import io
import json
from pathlib import Path

import yaml

from sim.errors import InputError
from sim.yamlio import load_yaml, loads_json, open_regular_file

TRACE_FORMATS = (
    "azure",
    "mooncake",
    "qwen",
    "splitwise",
    "lengths",
    "burstgpt",
    "generic",
    "canonical",
)
SPEC_SUFFIXES = (".yaml", ".yml")
_HEAD_BYTES = 1 << 16

# (format, its columns). A format is recognised only when every one of its columns is present;
# when several are, the one whose columns include the others' wins (splitwise over lengths, qwen
# over mooncake); two unrelated full matches are ambiguous and need --format.
_CSV_SIGNATURES = (
    ("azure", {"TIMESTAMP", "ContextTokens", "GeneratedTokens"}),
    ("splitwise", {"arrived_at", "num_prefill_tokens", "num_decode_tokens"}),
    ("lengths", {"num_prefill_tokens", "num_decode_tokens"}),
    ("burstgpt", {"Timestamp", "Request tokens", "Response tokens"}),
    ("generic", {"arrival_s", "prompt_tokens", "output_tokens"}),
)
_JSONL_SIGNATURES = (
    ("qwen", {"input_length", "output_length", "timestamp", "chat_id"}),
    ("mooncake", {"input_length", "output_length", "timestamp"}),
    ("canonical", {"arrival_s", "prompt_tokens", "output_tokens"}),
)


def _best_match(names: set[str], signatures, where: str) -> str | None:
    """The format whose columns are all among `names`; None when no format's are.

    Never a guess: two formats matching without one containing the other, or a header that
    has only part of a format's columns, is an InputError asking for --format."""
    full = [(fmt, needed) for fmt, needed in signatures if needed <= names]
    widest = [(fmt, needed) for fmt, needed in full if all(other <= needed for _, other in full)]
    if widest:
        return widest[0][0]
    if full:
        formats = " and ".join(fmt for fmt, _ in full)
        raise InputError(where, None, f"columns match both {formats}; pass --format to choose")
    by_share = sorted(signatures, key=lambda sig: -len(sig[1] & names) / len(sig[1]))  # stable: order breaks ties
    for fmt, needed in by_share:
        if len(needed & names) * 2 >= len(needed):
            missing = sorted(needed - names)
            raise InputError(where, missing[0], f"missing column: the header looks like a {fmt} trace "
                                                f"without {', '.join(missing)}; fix the header, or pass --format")
    return None


def read_text_head(path: Path) -> str:
    """The first bytes of a file as text; empty or binary files are an InputError."""
    with open_regular_file(path) as handle:
        head = handle.read(_HEAD_BYTES)
    where = str(path)
    if not head.strip():
        raise InputError(
            where, None, "empty file; expected a CSV/JSONL trace or a workload spec YAML"
        )
    if b"\x00" in head:
        raise InputError(
            where, None, "binary content; expected a CSV/JSONL trace or a workload spec YAML"
        )
    head = head.removeprefix(codecs.BOM_UTF8)  # Excel and Windows tools start UTF-8 files with one
    if len(head) == _HEAD_BYTES and b"\n" in head:
        head = head[: head.rindex(b"\n")]  # do not cut a multi-byte character in half
    try:
        return head.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(
            where, None, "not UTF-8 text; expected a CSV/JSONL trace or a spec YAML"
        ) from None


def _looks_like_spec(text: str) -> bool:
    try:
        document = load_yaml(text)
    except yaml.YAMLError:
        return False
    return isinstance(document, dict) and bool({"trace", "synthetic"} & set(document))


def sniff_format(path: Path) -> str:
    """Return one of TRACE_FORMATS, or "spec" for a workload spec YAML."""
    text = read_text_head(path)
    if path.suffix.lower() in SPEC_SUFFIXES:
        return "spec"
    first_line = next(line for line in text.splitlines() if line.strip()).strip()
    if first_line.startswith("{"):
        try:
            keys = set(loads_json(first_line, f"{path}:1"))
        except json.JSONDecodeError:
            raise InputError(
                f"{path}:1", None, "not valid JSON; expected one object per line"
            ) from None
        fmt = _best_match(keys, _JSONL_SIGNATURES, str(path))
        if fmt:
            return fmt
        raise InputError(
            str(path),
            None,
            f"JSON keys {sorted(keys)} match no known format; use --format generic --columns",
        )
    header = {name.strip() for name in next(csv.reader(io.StringIO(first_line)))}
    fmt = _best_match(header, _CSV_SIGNATURES, str(path))
    if fmt:
        return fmt
    if _looks_like_spec(text):
        return "spec"
    raise InputError(
        str(path),
        None,
        f"header {sorted(header)} matches no known format ({', '.join(TRACE_FORMATS)}); "
        "use --format generic --columns",
    )
