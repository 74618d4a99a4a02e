"""`load_workload`: one entry point for trace files, bundled trace names and spec YAMLs."""

from __future__ import annotations

from pathlib import Path

from sim.errors import InputError
from sim.inputs.workload.bundled import resolve_workload
from sim.inputs.workload.read_trace import load_trace
from sim.inputs.workload.sniff import sniff_format
from sim.inputs.workload.spec import read_spec, workload_from_spec
from sim.inputs.workload.trace import ClosedLoop, Trace
from sim.schema import MAX_SEED_EXCLUSIVE


def spec_seed(path: str | Path, fmt: str | None = None) -> int | None:
    """The `seed:` of a workload spec (None for a trace file, or a spec without one)."""
    resolved = resolve_workload(path)
    if (fmt or sniff_format(resolved)) != "spec":
        return None
    return read_spec(resolved).seed


def load_workload(
    path: str | Path,
    fmt: str | None = None,
    *,
    strict: bool = False,
    seed: int | None = None,
    **trace_options,
) -> Trace | ClosedLoop:
    """A trace file, a bundled name (`splitwise_conv`, `mooncake_conversation`, ...) or a
    workload spec YAML -> a `Trace` sorted by arrival, or a `ClosedLoop`.

    `fmt` overrides sniffing: one of TRACE_FORMATS, or "spec". `seed` (when given)
    overrides a spec's own seed; it also draws arrivals for length-only traces. Extra
    keyword options go to `load_trace` (keep_failed, columns, time_unit, lengths_rate_qps).
    Unsorted input is sorted with a `warnings` warning, or an InputError when `strict`.
    """
    if seed is not None and not 0 <= seed < MAX_SEED_EXCLUSIVE:
        raise InputError("--seed", None, f"must be a whole number in [0, 2**63); got {seed}")
    resolved = resolve_workload(path)
    kind = fmt or sniff_format(resolved)
    if kind == "spec":
        return workload_from_spec(resolved, strict=strict, seed=seed)
    return load_trace(resolved, kind, strict=strict, seed=seed, **trace_options)
