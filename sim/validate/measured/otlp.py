"""OpenTelemetry request spans in OTLP JSON, as vLLM exports them (`--otlp-traces-endpoint`
through a collector's file exporter: one export batch per line, or one JSON document).

vLLM (`vllm/tracing.py` `SpanAttributes`, read at the vLLM commit named in docs/measurements.md)
opens one span per request, `llm_request`, started at the request's arrival, with
`gen_ai.usage.prompt_tokens`, `gen_ai.usage.completion_tokens` and, in seconds,
`gen_ai.latency.time_to_first_token` and `gen_ai.latency.e2e`. Any span carrying those four
attributes is read (other spans are skipped); times are the server's, so they exclude the network.
Attribute values follow the OTLP JSON mapping: `intValue` (a decimal string or a number),
`doubleValue`, `stringValue`.
"""

from __future__ import annotations

import json
from pathlib import Path

from sim.errors import InputError
from sim.inputs.budget import MAX_TIME_S
from sim.validate.measured.run import MeasuredRun, build_run, count, nanoseconds, number, seconds_since_first
from sim.yamlio import MAX_DOCUMENT_BYTES, loads_json, read_text_bounded

PROMPT, OUTPUT = "gen_ai.usage.prompt_tokens", "gen_ai.usage.completion_tokens"
TTFT, E2E = "gen_ai.latency.time_to_first_token", "gen_ai.latency.e2e"
REQUIRED = (PROMPT, OUTPUT, TTFT, E2E)


def is_otlp(document) -> bool:
    return isinstance(document, dict) and "resourceSpans" in document


def _value(where: str, key: str, value):
    if not isinstance(value, dict) or len(value) != 1:
        raise InputError(where, key, "attribute value must be one of {intValue | doubleValue | stringValue: ...}")
    kind, raw = next(iter(value.items()))
    if kind == "intValue" and isinstance(raw, str) and raw.lstrip("-").isdigit():
        return int(raw)
    if kind in ("intValue", "doubleValue"):
        return raw
    return raw if kind == "stringValue" else None


def _spans(where: str, document: dict):
    for r, resource in enumerate(_objects(where, "resourceSpans", document)):
        for s, scope in enumerate(_objects(where, f"resourceSpans[{r}].scopeSpans", resource)):
            for k, span in enumerate(_objects(where, f"resourceSpans[{r}].scopeSpans[{s}].spans", scope)):
                if not isinstance(span, dict):
                    raise InputError(f"{where}: resourceSpans[{r}].scopeSpans[{s}].spans[{k}]", None,
                                     "must be an object")
                yield f"{where}: span {span.get('spanId', k)!s}", span


def _objects(where: str, field: str, parent) -> list:
    """`parent`'s list under the last name of `field` (absent or null: empty); a `parent` or list
    of another type is refused naming where it is."""
    if parent is None:
        return []
    if not isinstance(parent, dict):
        raise InputError(where, field.rsplit(".", 1)[0], "must be an object")
    items = parent.get(field.rsplit(".", 1)[-1])
    if items is None:
        return []
    if not isinstance(items, list):
        raise InputError(where, field, f"must be a list, got {type(items).__name__}")
    return items


def _attributes(where: str, span: dict) -> dict:
    items = span.get("attributes") or []
    if not isinstance(items, list):
        raise InputError(where, "attributes", "must be a list of {key, value}")
    out = {}
    for item in items:
        if not isinstance(item, dict) or "key" not in item:
            raise InputError(where, "attributes", "each must be {key, value}")
        if item["key"] in REQUIRED:
            out[item["key"]] = _value(where, item["key"], item.get("value"))
    return out


def _documents(path: Path) -> list[tuple[str, dict]]:
    text = read_text_bounded(path, MAX_DOCUMENT_BYTES)
    try:
        return [(str(path), loads_json(text, path))]
    except json.JSONDecodeError:
        pass
    docs = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                docs.append((f"{path}:{line_no}", loads_json(line, f"{path}:{line_no}")))
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}:{line_no}", None, f"not an OTLP JSON export batch ({exc.msg})") from None
    return docs


def read_otlp(path: Path) -> MeasuredRun:
    """Every request span (one carrying the four attributes), in file order."""
    rows = []
    for where, document in _documents(path):
        if not is_otlp(document):
            raise InputError(where, None, "must be an OTLP JSON export ({\"resourceSpans\": [...]})")
        for span_where, span in _spans(where, document):
            attrs = _attributes(span_where, span)
            if not attrs:
                continue
            missing = [k for k in REQUIRED if k not in attrs]
            if missing:
                raise InputError(span_where, missing[0], "missing: a request span needs " + ", ".join(REQUIRED))
            rows.append((nanoseconds(span_where, "startTimeUnixNano", span.get("startTimeUnixNano")),
                         count(span_where, PROMPT, attrs[PROMPT]), count(span_where, OUTPUT, attrs[OUTPUT]),
                         number(span_where, TTFT, attrs[TTFT], strict=True, maximum=MAX_TIME_S),
                         number(span_where, E2E, attrs[E2E], strict=True, maximum=MAX_TIME_S)))
    columns = list(zip(*rows)) if rows else [[]] * 5
    return build_run(path, "otlp", seconds_since_first(list(columns[0])), *columns[1:])
