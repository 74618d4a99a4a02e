"""Write a MeasuredRun in each per-request format (the readers' inverse).

Used to hand a simulated run to tools that read these formats and by the tests (round trips,
and fits on simulated runs whose true engine terms are known). Only the fields the readers use
are written, plus the few each format needs to be recognised; files are written atomically.
Arrivals are written relative to an epoch (the formats carry absolute clocks).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from sim.output import write_text
from sim.validate.measured.run import MeasuredRun

EPOCH_NS = 1_764_547_200_000_000_000  # an arbitrary fixed wall-clock origin for the absolute time fields


def _itls(run: MeasuredRun, i: int) -> list[float]:
    n_gaps = int(run.output_tokens[i]) - 1
    return [float(run.itl_s[i])] * n_gaps if n_gaps > 0 else []


def write_vllm_bench(run: MeasuredRun, path: Path, epoch_s: float = 0.0) -> None:
    n = len(run)
    data = {"backend": "vllm", "request_rate": "inf", "max_concurrency": None, "completed": n, "failed": 0,
            "input_lens": run.prompt_tokens.tolist(), "output_lens": run.output_tokens.tolist(),
            "ttfts": run.ttft_s.tolist(), "itls": [_itls(run, i) for i in range(n)],
            "latencies": run.e2e_s.tolist(), "start_times": (run.arrival_s + epoch_s).tolist(), "errors": [""] * n}
    write_text(Path(path), json.dumps(data))


def write_aiperf(run: MeasuredRun, path: Path, epoch_ns: int = EPOCH_NS) -> None:
    lines = []
    for i in range(len(run)):
        start_ns = epoch_ns + int(round(run.arrival_s[i] * 1e9))
        record = {"metadata": {"session_num": i, "turn_index": 0, "request_start_ns": start_ns,
                               "request_end_ns": start_ns + int(round(run.e2e_s[i] * 1e9)),
                               "benchmark_phase": "profiling", "was_cancelled": False},
                  "metrics": {"input_sequence_length": {"value": int(run.prompt_tokens[i]), "unit": "tokens"},
                              "output_sequence_length": {"value": int(run.output_tokens[i]), "unit": "tokens"},
                              "time_to_first_token": {"value": float(run.ttft_s[i]) * 1e3, "unit": "ms"},
                              "request_latency": {"value": float(run.e2e_s[i]) * 1e3, "unit": "ms"}},
                  "error": None}
        lines.append(json.dumps(record))
    write_text(Path(path), "\n".join(lines) + "\n")


def write_otlp(run: MeasuredRun, path: Path, epoch_ns: int = EPOCH_NS) -> None:
    spans = []
    for i in range(len(run)):
        start_ns = epoch_ns + int(round(run.arrival_s[i] * 1e9))
        attrs = [("gen_ai.usage.prompt_tokens", {"intValue": str(int(run.prompt_tokens[i]))}),
                 ("gen_ai.usage.completion_tokens", {"intValue": str(int(run.output_tokens[i]))}),
                 ("gen_ai.latency.time_to_first_token", {"doubleValue": float(run.ttft_s[i])}),
                 ("gen_ai.latency.e2e", {"doubleValue": float(run.e2e_s[i])})]
        spans.append({"traceId": f"{i + 1:032x}", "spanId": f"{i + 1:016x}", "name": "llm_request", "kind": 2,
                      "startTimeUnixNano": str(start_ns),
                      "endTimeUnixNano": str(start_ns + int(round(run.e2e_s[i] * 1e9))),
                      "attributes": [{"key": k, "value": v} for k, v in attrs]})
    document = {"resourceSpans": [{"resource": {"attributes": []},
                                   "scopeSpans": [{"scope": {"name": "vllm.llm_engine"}, "spans": spans}]}]}
    write_text(Path(path), json.dumps(document) + "\n")


WRITERS = {"vllm_bench": write_vllm_bench, "aiperf": write_aiperf, "otlp": write_otlp}


def simulated_run(trace_run: MeasuredRun, predicted: dict, source: str = "simulated") -> MeasuredRun:
    """A MeasuredRun whose TTFT and E2E are the simulator's `predicted` ones for `trace_run`'s
    workload (every request must have finished)."""
    if not predicted["finished"].all():
        raise ValueError("every simulated request must finish to stand in for a measured run")
    return MeasuredRun(trace_run.arrival_s.copy(), trace_run.prompt_tokens.copy(), trace_run.output_tokens.copy(),
                       np.asarray(predicted["ttft_s"], dtype=float), np.asarray(predicted["e2e_s"], dtype=float),
                       source, "simulated")
