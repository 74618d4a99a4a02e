"""Validation cases: one measured end-to-end result per CSV row, with its source.

The same columns serve the bundled cases (sim/validate/cases/*.csv) and a user's own
measurements. Required columns: source, engine, model, gpu, tp, weight_dtype, workload,
num_requests, metric, value. Optional: case_id, engine_version, kv_dtype, input_len, output_len,
concurrency, pp (pipeline stages of `tp` GPUs each, default 1: the replica is tp x pp GPUs),
engine_args (space-separated key=value config overrides, e.g. `policy=continuous`), split (fit |
score: whether a preset's overhead terms were fitted on the row), note.

Workloads: `fixed_batch` (num_requests identical requests of input_len/output_len sent together,
the vLLM latency test), `infinite_rate` (num_requests fixed-length requests all queued at t=0:
trtllm-bench, offline throughput), `sharegpt` (num_requests (prompt, output) pairs sampled with
seed 0 from the bundled ShareGPT length statistics, all at t=0), `closed_loop` (concurrency
clients, num_requests fixed-length requests: `vllm bench serve --max-concurrency`; with
`workload_args` `range_ratio=0.8` each request's input and output length is drawn uniformly from the
integers [int(0.8 L), L], as the benchmark's random dataset does, seed 0; `measured=startup_stall`: the
measured run's first wave sat through a one-off start-up stall, so its whole-run metrics (mean / p99 TTFT,
mean E2E, throughput) are reported as cannot express, its median TTFT and TPOT compared),
`shared_prefix_stages` (constant-rate load stages over shared-prefix prompts, inference-perf's
`constant` load with `shared_prefix` data; its parameters and the stage a row reads are in
`workload_args`, see sim/validate/staged.py), `steady_decode` (a decode server measured alone:
every attention rank decoding `concurrency` sequences of input_len + output_len tokens, the
running batch's output tok/s; sim/validate/steady_decode.py).

Metrics: mean / median / p99 of TTFT, TPOT (per request, (E2E - TTFT) / (output - 1)) and E2E in ms;
request/s; output tok/s of the whole run, or per GPU (`output_throughput_per_gpu_tok_s`: the run's
output tok/s over its tp x pp GPUs).
"""

from __future__ import annotations

import csv
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from sim.errors import InputError
from sim.inputs.budget import MAX_TOTAL_TOKENS, require
from sim.inputs.config import MAX_TP
from sim.inputs.layout.config import MAX_PP
from sim.numbers import strict_number
from sim.schema import MAX_REQUESTS, MAX_TOKENS
from sim.yamlio import check_regular_file

CASES_DIR = Path(__file__).resolve().parent / "cases"
REQUIRED = ("source", "engine", "model", "gpu", "tp", "weight_dtype", "workload", "num_requests", "metric", "value")
OPTIONAL = ("case_id", "engine_version", "kv_dtype", "input_len", "output_len", "concurrency", "engine_args", "split",
            "note", "workload_args", "pp")
WORKLOADS = ("fixed_batch", "infinite_rate", "sharegpt", "closed_loop", "shared_prefix_stages", "steady_decode")
METRICS = ("mean_e2e_latency_ms", "mean_ttft_ms", "mean_tpot_ms", "request_throughput_req_s",
           "output_throughput_tok_s", "p99_ttft_ms", "median_ttft_ms", "median_tpot_ms", "p99_tpot_ms",
           "median_e2e_latency_ms", "p99_e2e_latency_ms", "output_throughput_per_gpu_tok_s")
SPLITS = ("fit", "score", "")


@dataclass(frozen=True)
class Case:
    case_id: str
    source: str
    engine: str
    model: str
    gpu: str
    tp: int
    weight_dtype: str
    workload: str
    num_requests: int
    metric: str
    value: float
    engine_version: str = ""
    kv_dtype: str = ""
    input_len: int | None = None
    output_len: int | None = None
    concurrency: int | None = None
    engine_args: dict = field(default_factory=dict)
    workload_args: dict = field(default_factory=dict)
    split: str = ""
    note: str = ""
    file: str = ""
    pp: int = 1


def bundled_case_files() -> list[Path]:
    return sorted(CASES_DIR.glob("*.csv"))


def load_cases(paths: list[Path] | None = None) -> list[Case]:
    """Cases from CSV files (the bundled ones when `paths` is None); InputError on a missing
    column, an unknown workload/metric/split or a value out of range, naming file, row and field."""
    cases: list[Case] = []
    for path in paths if paths is not None else bundled_case_files():
        cases += _load_file(Path(path))
    return cases


def _load_file(path: Path) -> list[Case]:
    check_regular_file(path)  # before pandas opens it: a FIFO would block, /dev/zero never end
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise InputError(path, None, f"cannot read CSV ({exc.__class__.__name__})") from None
    repeated = _repeated_header_names(path)
    if repeated:
        raise InputError(path, repeated[0], "column given twice; give each column once")
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise InputError(path, None, f"missing column(s) {', '.join(missing)}; required: {', '.join(REQUIRED)}")
    unknown = [c for c in frame.columns if c not in REQUIRED + OPTIONAL]
    if unknown:
        raise InputError(path, None, f"unknown column(s) {', '.join(unknown)}; allowed: "
                                     f"{', '.join(REQUIRED + OPTIONAL)}")
    if frame.empty:
        raise InputError(path, None, "has a header but no rows (one measured result per row)")
    return [_row_case(path, i, row) for i, row in enumerate(frame.to_dict("records"), start=2)]


_COUNT_LIMITS = {"tp": MAX_TP, "pp": MAX_PP, "num_requests": MAX_REQUESTS, "input_len": MAX_TOKENS,
                 "output_len": MAX_TOKENS, "concurrency": MAX_REQUESTS}


def _repeated_header_names(path: Path) -> list[str]:
    """Header names given more than once (pandas would rename the second `x.1`, a name the user
    never wrote)."""
    with open(path, newline="", encoding="utf-8") as handle:
        header = next(csv.reader(handle), [])
    return sorted(name for name, n in Counter(n.strip() for n in header).items() if n > 1)


def _int(path, line, row, key, minimum=1, required=True) -> int | None:
    text = str(row.get(key, "")).strip()
    if not text:
        if required:
            raise InputError(f"{path}:{line}", key, "required for this workload")
        return None
    return strict_number(text, f"{path}:{line}", key, whole=True, low=minimum, high=_COUNT_LIMITS[key])


def _choice(path, line, row, key, allowed) -> str:
    value = str(row.get(key, "")).strip()
    if value not in allowed:
        raise InputError(f"{path}:{line}", key, f"must be one of {', '.join(a for a in allowed if a)} (got {value!r})")
    return value


def _engine_args(path, line, text: str, column: str = "engine_args") -> dict:
    args = {}
    for item in text.split():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(f"{path}:{line}", column, f"items are key=value (got {item!r})")
        args[key] = {"true": True, "false": False}.get(value, value)  # flags as flags: config schemas take no text
    return args


def _row_case(path: Path, line: int, row: dict) -> Case:
    workload = _choice(path, line, row, "workload", WORKLOADS)
    metric = _choice(path, line, row, "metric", METRICS)
    fixed_lengths = workload not in ("sharegpt", "shared_prefix_stages")
    value = strict_number(row["value"], f"{path}:{line}", "value", low=0.0, low_open=True)
    return _checked_size(path, line, Case(
        case_id=str(row.get("case_id") or f"{path.stem}:{line}"),
        source=row["source"].strip(), engine=row["engine"].strip(), model=row["model"].strip(),
        gpu=row["gpu"].strip(), tp=_int(path, line, row, "tp"), weight_dtype=row["weight_dtype"].strip(),
        workload=workload, num_requests=_int(path, line, row, "num_requests"), metric=metric, value=value,
        engine_version=str(row.get("engine_version", "")).strip(), kv_dtype=str(row.get("kv_dtype", "")).strip(),
        input_len=_int(path, line, row, "input_len", required=fixed_lengths),
        output_len=_int(path, line, row, "output_len", required=fixed_lengths),
        concurrency=_int(path, line, row, "concurrency", required=workload in ("closed_loop", "steady_decode")),
        engine_args=_engine_args(path, line, str(row.get("engine_args", ""))),
        workload_args=_workload_args(path, line, row, workload),
        split=_choice(path, line, row, "split", SPLITS), note=str(row.get("note", "")).strip(), file=str(path),
        pp=_pp(path, line, row),
    ))


RANDOM_LENGTH_WORKLOADS = ("fixed_batch", "infinite_rate", "closed_loop")  # take workload_args range_ratio


def _workload_args(path: Path, line: int, row: dict, workload: str) -> dict:
    """The row's workload_args; outside shared_prefix_stages (which checks its own) only `range_ratio`,
    and only for the fixed-length workloads: a key nothing reads is refused, not ignored."""
    args = _engine_args(path, line, str(row.get("workload_args", "")), "workload_args")
    if workload in ("shared_prefix_stages", "steady_decode"):
        return args
    allowed = ("range_ratio", "measured") if workload in RANDOM_LENGTH_WORKLOADS else ()
    unknown = sorted(set(args) - set(allowed))
    if unknown:
        raise InputError(f"{path}:{line}", f"workload_args.{unknown[0]}",
                         f"not read by workload {workload}; allowed: {', '.join(allowed) or 'none'}")
    if args.get("measured", "ok") not in ("ok", "startup_stall"):
        raise InputError(f"{path}:{line}", "workload_args.measured", "ok or startup_stall")
    if "range_ratio" in args:
        strict_number(str(args["range_ratio"]), f"{path}:{line}", "workload_args.range_ratio", low=0.0, low_open=True,
                      high=1.0)
    return args


def _pp(path: Path, line: int, row: dict) -> int:
    """The row's pipeline stages: the `pp` column (1 when empty); a `pp` in engine_args as well is
    refused (one place says it)."""
    if set(_engine_args(path, line, str(row.get("engine_args", "")))) & {"pp", "pipeline_parallel_size", "pp_size"}:
        raise InputError(f"{path}:{line}", "engine_args", "pipeline stages go in the pp column, not engine_args")
    return _int(path, line, row, "pp", required=False) or 1


def _checked_size(path: Path, line: int, case: Case) -> Case:
    """The case, if replaying it stays within sim.inputs.budget (requests x tokens per request)."""
    tokens = case.num_requests * ((case.input_len or 0) + (case.output_len or 0))
    require(tokens, MAX_TOTAL_TOKENS, "tokens", "num_requests x (input_len + output_len)", f"{path}:{line}")
    return case
