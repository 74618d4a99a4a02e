"""`load_trace`: one trace file (CSV or JSONL, any bundled or generic format; not a spec) -> a `Trace`."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sim.errors import InputError
from sim.inputs.budget import check_rate_qps
from sim.inputs.workload.bundled import resolve_workload
from sim.inputs.workload.csv_formats import CSV_SCHEMAS, TIME_UNIT_S, generic_csv_schema, load_csv
from sim.inputs.workload.jsonl_formats import JSONL_SCHEMAS, generic_jsonl_schema, load_jsonl
from sim.inputs.workload.sniff import TRACE_FORMATS, read_text_head, sniff_format
from sim.inputs.workload.synthetic.arrivals import arrival_times_s
from sim.inputs.workload.trace import Trace

DEFAULT_LENGTHS_RATE_QPS = 1.0  # length-only traces get Poisson arrivals at this rate unless told


def load_trace(
    path: str | Path,
    fmt: str | None = None,
    *,
    strict: bool = False,
    seed: int | None = None,
    keep_failed: bool = False,
    columns: dict[str, str] | None = None,
    time_unit: str = "s",
    lengths_rate_qps: float = DEFAULT_LENGTHS_RATE_QPS,
) -> Trace:
    """Load a trace file (not a spec). `fmt` None sniffs the format from the content.

    Length-only CSVs get Poisson arrivals at `lengths_rate_qps` drawn from `seed`.
    `columns` maps our fields (arrival_s, prompt_tokens, output_tokens, hash_ids) to the
    file's names for the generic format; `time_unit` (s, ms, us) scales its times.
    """
    path = resolve_workload(path)
    fmt = fmt or sniff_format(path)
    if fmt not in TRACE_FORMATS:
        raise InputError(
            "--format", None, f"{fmt!r} is not a trace format; one of {', '.join(TRACE_FORMATS)}"
        )
    if time_unit not in TIME_UNIT_S:
        raise InputError("--time-unit", None, f"{time_unit!r}; one of {', '.join(TIME_UNIT_S)}")
    check_rate_qps(lengths_rate_qps, "--lengths-rate-qps")
    if fmt in JSONL_SCHEMAS:
        read_text_head(path)
        return load_jsonl(path, JSONL_SCHEMAS[fmt], strict=strict)
    if fmt == "generic":
        if read_text_head(path).lstrip().startswith("{"):
            schema = generic_jsonl_schema(columns, TIME_UNIT_S[time_unit])
            return load_jsonl(path, schema, strict=strict)
        return load_csv(path, generic_csv_schema(columns, time_unit), strict=strict)
    read_text_head(path)
    rng = np.random.default_rng(0 if seed is None else seed)

    def poisson_arrivals_s(n_rows: int) -> np.ndarray:
        return arrival_times_s(rng, "poisson", lengths_rate_qps, n=n_rows)

    return load_csv(
        path,
        CSV_SCHEMAS[fmt],
        strict=strict,
        keep_failed=keep_failed,
        make_arrivals_s=poisson_arrivals_s,
    )
