"""`vllm bench serve --save-result --save-detailed` JSON, request by request.

Field names and units as vLLM's `vllm/benchmarks/serve.py` writes them (read at commit
009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1): one list entry per request, in the order the
requests were sent: `input_lens` (prompt tokens), `output_lens` (generated tokens, 0 for a
failed request), `ttfts` (s), `itls` (list of s per request), `latencies` (E2E, s),
`start_times` (s on the client's perf_counter clock, when the request was sent), `errors`
("" for success). Files written before `start_times` existed replay only as a burst
(`request_rate` inf, no `max_concurrency`): every request at t = 0.
"""

from __future__ import annotations

import math
from pathlib import Path

from sim.errors import InputError
from sim.inputs.budget import MAX_TIME_S
from sim.validate.measured.run import MeasuredRun, build_run, count, number

PER_REQUEST_KEYS = ("input_lens", "output_lens", "ttfts", "latencies")


def is_vllm_bench(data) -> bool:
    return isinstance(data, dict) and all(k in data for k in ("ttfts", "input_lens"))


def _list(path, data: dict, key: str, n: int | None) -> list | None:
    if key not in data:
        return None
    values = data[key]
    if not isinstance(values, list):
        raise InputError(path, key, f"must be a list (one entry per request), got {type(values).__name__}")
    if n is not None and len(values) != n:
        raise InputError(path, key, f"must have one entry per request ({n}, as input_lens), got {len(values)}")
    return values


def _burst_only(path, data: dict) -> None:
    rate = data.get("request_rate", "inf")
    burst = rate in ("inf", None) or (isinstance(rate, float) and math.isinf(rate))
    if not burst or data.get("max_concurrency"):
        raise InputError(path, "start_times", "missing: without send times only a `--request-rate inf` run without "
                                              "--max-concurrency can be replayed (rerun with a newer vLLM)")


def read_vllm_bench(path: Path, data: dict) -> MeasuredRun:
    """The successful requests of a detailed bench result; InputError on any bad entry."""
    missing = [k for k in PER_REQUEST_KEYS if k not in data]
    if missing:
        raise InputError(path, None, f"missing key(s) {', '.join(missing)}: not a `vllm bench serve --save-result "
                                     f"--save-detailed` file")
    n = len(_list(path, data, "input_lens", None))
    lists = {k: _list(path, data, k, n) for k in PER_REQUEST_KEYS + ("start_times", "errors", "itls")}
    if lists["start_times"] is None:
        _burst_only(path, data)
    errors = lists["errors"] or [""] * n
    cols = {k: [] for k in ("arrival", "prompt", "output", "ttft", "e2e")}
    for i in range(n):
        where = f"{path}: request {i}"
        if not isinstance(errors[i], str):
            raise InputError(where, "errors", f"must be a string (\"\" for success), got {errors[i]!r}")
        if errors[i]:
            continue
        cols["prompt"].append(count(where, "input_lens", lists["input_lens"][i]))
        cols["output"].append(count(where, "output_lens", lists["output_lens"][i]))
        cols["ttft"].append(number(where, "ttfts", lists["ttfts"][i], strict=True, maximum=MAX_TIME_S))
        cols["e2e"].append(number(where, "latencies", lists["latencies"][i], strict=True, maximum=MAX_TIME_S))
        start = lists["start_times"]
        cols["arrival"].append(0.0 if start is None else number(where, "start_times", start[i], minimum=-math.inf))
        if lists["itls"] is not None:
            gaps = lists["itls"][i]
            if not isinstance(gaps, list):
                raise InputError(where, "itls", f"must be a list of seconds, got {type(gaps).__name__}")
            for gap in gaps:
                number(where, "itls", gap, maximum=MAX_TIME_S)
    n_failed = sum(1 for e in errors if e)
    return build_run(path, "vllm_bench", cols["arrival"], cols["prompt"], cols["output"], cols["ttft"], cols["e2e"],
                     n_failed, arrival_field="start_times")

