"""A `vllm bench serve --save-result` JSON as validation cases (the same rows `validate` reads)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from sim.errors import InputError
from sim.numbers import strict_number
from sim.schema import MAX_REQUESTS, MAX_TOKENS
from sim.validate.cases import Case
from sim.yamlio import loads_json, read_bytes_bounded

REQUIRED_KEYS = ("completed", "total_input_tokens", "total_output_tokens", "output_throughput")


def cases_from_bench_json(path: Path, engine: str, model: str | None, hardware: str | None, tp: int,
                          weight_dtype: str) -> list[Case]:
    """One output-throughput case (and a mean end-to-end latency case when recorded) from a
    `vllm bench serve` result: fixed-length requests of the run's mean input/output length, sent
    by `max_concurrency` clients (closed loop) or all at once (request rate inf)."""
    try:
        data = loads_json(read_bytes_bounded(path), path)
    except json.JSONDecodeError as exc:
        raise InputError(path, None, f"cannot read a bench result JSON ({exc.__class__.__name__})") from None
    if not isinstance(data, dict):
        raise InputError(path, None, "must hold a JSON object (a `vllm bench serve --save-result` file)")
    missing = [k for k in REQUIRED_KEYS if k not in data]
    if missing:
        raise InputError(path, None, f"missing key(s) {', '.join(missing)} (a `vllm bench serve --save-result` file)")
    if not model or not hardware:
        raise InputError("--model/--hardware", None, "required with a bench JSON (it does not name the GPU)")
    number = _reader(path, data)
    completed = number("completed", whole=True, low=1, high=MAX_REQUESTS)
    total_input = number("total_input_tokens", whole=True, low=1, high=MAX_REQUESTS * MAX_TOKENS)
    total_output = number("total_output_tokens", whole=True, low=1, high=MAX_REQUESTS * MAX_TOKENS)
    throughput = number("output_throughput", low=0.0, low_open=True)
    rate = data.get("request_rate", "inf")
    if rate not in ("inf", None) and not (isinstance(rate, float) and math.isinf(rate) and rate > 0):
        raise InputError(path, "request_rate", "only `--request-rate inf` runs can be replayed (all sent at once or "
                                               "with --max-concurrency)")
    concurrency = data.get("max_concurrency")
    if concurrency is not None:
        concurrency = number("max_concurrency", whole=True, low=1, high=MAX_REQUESTS)
    input_len, output_len = max(1, round(total_input / completed)), max(1, round(total_output / completed))
    for key, length in (("total_input_tokens", input_len), ("total_output_tokens", output_len)):
        if length > MAX_TOKENS:
            raise InputError(path, key, f"/ completed must be at most {MAX_TOKENS:,} tokens per request")
    common = dict(source=f"{path} (vllm bench serve)", engine=engine, model=model, gpu=hardware, tp=tp,
                  weight_dtype=weight_dtype, num_requests=completed, input_len=input_len, output_len=output_len,
                  workload="closed_loop" if concurrency else "infinite_rate", concurrency=concurrency, split="fit",
                  file=str(path))
    cases = [Case(case_id=f"{Path(path).stem}:output_throughput", metric="output_throughput_tok_s",
                  value=throughput, **common)]
    if "mean_e2el_ms" in data and not concurrency:
        cases.append(Case(case_id=f"{Path(path).stem}:mean_e2el", metric="mean_e2e_latency_ms",
                          value=number("mean_e2el_ms", low=0.0, low_open=True), **common))
    return cases


def _reader(path: Path, data: dict):
    """number(key, **limits): data[key] through sim.numbers.strict_number, naming the file and key."""
    def number(key: str, **limits):
        return strict_number(data[key], str(path), key, **limits)
    return number
