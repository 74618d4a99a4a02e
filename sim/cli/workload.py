"""`infersim workload ...`: describe a trace or spec, and sample a spec to canonical JSONL.

Commands raise `InputError` on bad input; the main CLI (sim/cli/errors.py) turns it into one
line on stderr and exit status 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from sim.cli.common import new_app
from sim.errors import InputError
from sim.inputs.workload.canonical import write_canonical_jsonl
from sim.inputs.workload.load import load_workload
from sim.inputs.workload.read_trace import DEFAULT_LENGTHS_RATE_QPS
from sim.inputs.workload.stats import describe, format_description
from sim.inputs.workload.trace import ClosedLoop

workload_app = new_app(
    help="Inspect and generate workloads (trace files, bundled traces, spec YAMLs).",
)


def parse_column_mapping(text: str | None) -> dict[str, str] | None:
    """`arrival_s=ts,prompt_tokens=in,output_tokens=out` -> a dict (our field -> file column)."""
    if not text:
        return None
    allowed = {"arrival_s", "prompt_tokens", "output_tokens", "hash_ids"}
    mapping = {}
    for item in text.split(","):
        ours, sep, theirs = item.partition("=")
        if not sep or ours.strip() not in allowed or not theirs.strip():
            raise InputError(
                "--columns", item, f"use FIELD=COLUMN pairs, FIELD one of {sorted(allowed)}"
            )
        mapping[ours.strip()] = theirs.strip()
    return mapping


@workload_app.command("describe")
def describe_command(
    path_or_spec: Annotated[str, typer.Argument(help="Trace file, bundled name or spec YAML.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the statistics as JSON.")] = False,
    fmt: Annotated[
        str | None, typer.Option("--format", help="Trace format (default: sniffed).")
    ] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Unsorted arrivals are an error.")
    ] = False,
    keep_failed: Annotated[
        bool, typer.Option("--keep-failed", help="BurstGPT: keep zero-output (failed) rows.")
    ] = False,
    columns: Annotated[
        str | None, typer.Option("--columns", help="Generic format: FIELD=COLUMN,...")
    ] = None,
    time_unit: Annotated[
        str, typer.Option("--time-unit", help="Generic format: s, ms or us.")
    ] = "s",
    lengths_rate_qps: Annotated[
        float, typer.Option("--lengths-rate-qps", help="Poisson rate for length-only traces.")
    ] = DEFAULT_LENGTHS_RATE_QPS,
) -> None:
    """Count, duration, mean QPS, length statistics, infinite-cache prefix hit rate."""
    options = {}
    if fmt != "spec":
        options = {
            "keep_failed": keep_failed,
            "columns": parse_column_mapping(columns),
            "time_unit": time_unit,
            "lengths_rate_qps": lengths_rate_qps,
        }
    workload = load_workload(path_or_spec, fmt, strict=strict, **options)
    summary = describe(workload)
    typer.echo(json.dumps(summary, indent=2) if as_json else format_description(summary))


@workload_app.command("sample")
def sample_command(
    spec: Annotated[str, typer.Argument(help="Workload spec YAML (or any trace) to materialise.")],
    out: Annotated[Path, typer.Option("--out", help="Canonical JSONL file to write.")],
    seed: Annotated[int | None, typer.Option("--seed", help="Overrides the spec's seed.")] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Unsorted arrivals are an error.")
    ] = False,
) -> None:
    """Generate the requests of SPEC and write them as canonical JSONL."""
    from sim.cli.outputs import claim
    from sim.run.destination import FileOut

    claim(files=[FileOut("--out", out)])  # refused before any work (an input, a folder, a FIFO), locked
    if out.suffix != ".jsonl":
        raise InputError("--out", None, f"{out} must end in .jsonl (sample writes canonical JSONL, and a trace's "
                                        "suffix tells readers its format)")
    workload = load_workload(spec, strict=strict, seed=seed)
    n_rows = write_canonical_jsonl(workload, out)
    closed = isinstance(workload, ClosedLoop)
    note = " (closed loop: the request pool; concurrency stays in the spec)" if closed else ""
    typer.echo(f"wrote {n_rows:,} requests to {out}{note}")


@workload_app.command("schema")
def schema_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON Schema instead of the page.")] = False,
) -> None:
    """The workload spec YAML reference: every key, its type, default and allowed range."""
    from sim.cli.schema_doc import json_schema, markdown

    typer.echo(json.dumps(json_schema(), indent=2) if as_json else markdown(), nl=False)
