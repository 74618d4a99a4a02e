"""One sweep point -> one row: simulate it and flatten the summary next to its parameters.

`run_point` is what the backends ship to worker processes (it must stay a picklable top-level
function of plain data). Workers keep the loaded base trace per (trace, format, cut, seed), so a
grid over engine knobs reads the trace once per worker."""

from __future__ import annotations

import functools

from sim.inputs.config import EngineConfig
from sim.inputs.workload import apply_transforms
from sim.inputs.workload.trace import ClosedLoop, Trace
from sim.run.invoke import load_run_workload, poisson_arrivals, run
from sim.sweep.grid import SweepPoint
from sim.sweep.slo import SWEEP_PERCENTILES

# summary keys that repeat a config field; kept only when the run resolved them to another value
_RESOLVED_SUFFIX = "_resolved"


@functools.lru_cache(maxsize=8)
def _base_workload(trace: str | None, fmt: str | None, max_requests: int | None, seed: int) -> Trace | ClosedLoop:
    return load_run_workload(trace, fmt, None, max_requests, seed)


def point_workload(workload: dict, seed: int) -> Trace | ClosedLoop:
    """The workload of a point: the cached base trace, with Poisson arrivals at `qps` (as simulate
    --qps), re-timed to `trace_qps` keeping its shape, or sped up `rate_scale` times."""
    base = _base_workload(workload["trace"], workload["format"], workload["max_requests"], seed)
    trace_qps = workload.get("trace_qps")
    if workload["qps"] is not None:
        return poisson_arrivals(base, workload["qps"], seed) if not isinstance(base, ClosedLoop) else base
    if isinstance(base, ClosedLoop) or (trace_qps is None and workload["rate_scale"] is None):
        return base
    return apply_transforms(base, rate_scale=workload["rate_scale"], target_qps=trace_qps)


def run_point(point: SweepPoint) -> dict:
    """Simulate `point` (nothing written) and return its row: point_id, the config and workload
    parameters as flat columns, then the flattened summary metrics (e.g. `ttft_s_p99`)."""
    cfg = EngineConfig.model_validate(point.config)
    summary = run(cfg, point_workload(point.workload, cfg.seed), percentiles=SWEEP_PERCENTILES).summary
    summary.pop("config")  # the row has the config's fields as its own columns already
    return point_row(point, summary)


def point_row(point: SweepPoint, summary: dict) -> dict:
    row = {"point_id": point.point_id}
    row.update(flatten(point.config))
    row.update(flatten(point.workload))
    for key, value in flatten(summary).items():
        if key not in row:
            row[key] = value
        elif row[key] != value:
            row[key + _RESOLVED_SUFFIX] = value
    return row


def flatten(data: dict, prefix: str = "") -> dict:
    """{"ttft_s": {"p99": 1.0}, "goodput": None} -> {"ttft_s_p99": 1.0, "goodput": None}."""
    flat = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, name + "_"))
        else:
            flat[name] = value
    return flat
