"""A `vllm bench serve --save-result` JSON as validation cases (the same rows `validate` reads)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from sim.errors import InputError
from sim.validate.cases import Case

REQUIRED_KEYS = ("completed", "total_input_tokens", "total_output_tokens", "output_throughput")


def cases_from_bench_json(path: Path, engine: str, model: str | None, hardware: str | None, tp: int,
                          weight_dtype: str) -> list[Case]:
    """One output-throughput case (and a mean end-to-end latency case when recorded) from a
    `vllm bench serve` result: fixed-length requests of the run's mean input/output length, sent
    by `max_concurrency` clients (closed loop) or all at once (request rate inf)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(path, None, f"cannot read a bench result JSON ({exc.__class__.__name__})") from None
    if not isinstance(data, dict):
        raise InputError(path, None, "must hold a JSON object (a `vllm bench serve --save-result` file)")
    missing = [k for k in REQUIRED_KEYS if k not in data]
    if missing:
        raise InputError(path, None, f"missing key(s) {', '.join(missing)} (a `vllm bench serve --save-result` file)")
    if not model or not hardware:
        raise InputError("--model/--hardware", None, "required with a bench JSON (it does not name the GPU)")
    completed = int(data["completed"])
    if completed < 1:
        raise InputError(path, "completed", "must be >= 1")
    rate = data.get("request_rate", "inf")
    if rate not in ("inf", None) and not (isinstance(rate, float) and math.isinf(rate)):
        raise InputError(path, "request_rate", "only `--request-rate inf` runs can be replayed (all sent at once or "
                                               "with --max-concurrency)")
    concurrency = data.get("max_concurrency")
    common = dict(source=f"{path} (vllm bench serve)", engine=engine, model=data.get("model_id") and model or model,
                  gpu=hardware, tp=tp, weight_dtype=weight_dtype, num_requests=completed,
                  input_len=max(1, round(data["total_input_tokens"] / completed)),
                  output_len=max(1, round(data["total_output_tokens"] / completed)),
                  workload="closed_loop" if concurrency else "infinite_rate",
                  concurrency=int(concurrency) if concurrency else None, split="fit", file=str(path))
    cases = [Case(case_id=f"{Path(path).stem}:output_throughput", metric="output_throughput_tok_s",
                  value=float(data["output_throughput"]), **common)]
    if data.get("mean_e2el_ms") and not concurrency:
        cases.append(Case(case_id=f"{Path(path).stem}:mean_e2el", metric="mean_e2e_latency_ms",
                          value=float(data["mean_e2el_ms"]), **common))
    return cases
