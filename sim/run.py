"""A whole run as users invoke it: load the workload, simulate, tabulate, write the files."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from sim.config import EngineConfig
from sim.errors import InputError
from sim.output import prepare_out_dir, write_json, write_parquet
from sim.simulate import SimResult, simulate
from sim.summary import requests_frame, summarize
from sim.trace import ClosedLoop, Trace
from sim.workload import apply_transforms, load_workload

DEFAULT_TRACE = "splitwise_conv"


@dataclass
class RunOutput:
    result: SimResult
    summary: dict
    requests: pd.DataFrame


def load_run_workload(trace: str | None, fmt: str | None = None, rate_scale: float | None = None,
                      max_requests: int | None = None, seed: int = 0) -> Trace | ClosedLoop:
    """The workload of a run: a trace/spec path or bundled name, optionally sped up or cut."""
    if max_requests is not None and max_requests < 1:
        raise InputError("--max-requests", None, f"must be at least 1; got {max_requests}")
    workload = load_workload(trace or DEFAULT_TRACE, fmt, seed=seed)
    if isinstance(workload, ClosedLoop):
        return workload
    if max_requests is not None:
        workload = workload.take(range(min(max_requests, len(workload))))
    if rate_scale is not None:
        workload = apply_transforms(workload, rate_scale=rate_scale)
    return workload


def run(cfg: EngineConfig, workload: Trace | ClosedLoop, out_dir: Path | None = None,
        progress: Callable[[int, int], None] | None = None) -> RunOutput:
    """Simulate and, with `out_dir`, write summary.json, requests.parquet (and steps.parquet)."""
    if out_dir is not None:
        out_dir = prepare_out_dir(out_dir)
    result = simulate(cfg, workload, progress)
    frame = requests_frame(result)
    summary = summarize(result, frame)
    if out_dir is not None:
        write_parquet(out_dir / "requests.parquet", frame)
        if cfg.record_steps:
            write_parquet(out_dir / "steps.parquet", result.recorder.steps_frame())
        write_json(out_dir / "summary.json", summary)
    return RunOutput(result, summary, frame)
