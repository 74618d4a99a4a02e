"""A whole run as users invoke it: load the workload, simulate, tabulate, write the files."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from sim.config import EngineConfig
from sim.errors import InputError
from sim.output import atomic_run_dir, write_json, write_parquet
from sim.simulate import SimResult, simulate
from sim.summary import requests_frame, summarize
from sim.trace import ClosedLoop, Trace
from sim.workload import apply_transforms, load_workload
from sim.workload.load import spec_seed

DEFAULT_TRACE = "splitwise_conv"
RUN_FILES = ("summary.json", "requests.parquet", "steps.parquet")  # what a run folder may hold


@dataclass
class RunOutput:
    result: SimResult
    summary: dict
    requests: pd.DataFrame


def resolve_seed(cfg: EngineConfig, trace: str | None, fmt: str | None = None) -> EngineConfig:
    """The run's seed: an explicit one (--seed, or `seed:` in the config YAML) wins; else the
    workload spec's `seed:`; else 0. The one seed drives both the workload and the simulation."""
    if "seed" in cfg.model_fields_set:
        return cfg
    seed = spec_seed(trace or DEFAULT_TRACE, fmt)
    return cfg if seed is None else cfg.model_copy(update={"seed": seed})


def load_run_workload(trace: str | None, fmt: str | None = None, rate_scale: float | None = None,
                      max_requests: int | None = None, seed: int = 0) -> Trace | ClosedLoop:
    """The workload of a run: a trace/spec path or bundled name, optionally sped up or cut."""
    if max_requests is not None and max_requests < 1:
        raise InputError("--max-requests", None, f"must be at least 1; got {max_requests}")
    workload = load_workload(trace or DEFAULT_TRACE, fmt, seed=seed)
    return _cut(workload, max_requests, rate_scale)


def is_synthetic(trace: str | None, fmt: str | None = None) -> bool:
    """Whether the workload's arrivals come from the seed (a spec YAML or a length-only trace)."""
    from sim.workload.load import resolve_workload
    from sim.workload.sniff import sniff_format

    return (fmt or sniff_format(resolve_workload(trace or DEFAULT_TRACE))) in ("spec", "lengths")


def _cut(workload: Trace | ClosedLoop, max_requests: int | None, rate_scale: float | None) -> Trace | ClosedLoop:
    if isinstance(workload, ClosedLoop):
        return workload
    if max_requests is not None:
        workload = workload.take(range(min(max_requests, len(workload))))
    if rate_scale is not None:
        workload = apply_transforms(workload, rate_scale=rate_scale)
    return workload


def run(cfg: EngineConfig, workload: Trace | ClosedLoop, out_dir: Path | None = None,
        progress: Callable[[int, int], None] | None = None, uncertainty: int | None = None,
        resample: Callable[[int], Trace | ClosedLoop] | None = None) -> RunOutput:
    """Simulate and, with `out_dir`, write summary.json, requests.parquet (and steps.parquet).

    The folder is replaced whole (see `sim.output.atomic_run_dir`): its parent's writability is
    checked before simulating, and a failed or killed run leaves an earlier run's folder as it was.
    summary.json carries `extrapolating` (sim/intervals.py); with `uncertainty` = N it also
    carries `intervals` from N perturbed replays (`resample(seed)` re-draws synthetic arrivals)."""
    from sim.intervals import check_replays

    if uncertainty is not None:
        check_replays(uncertainty)
    if out_dir is None:
        return _simulate(cfg, workload, progress, uncertainty, resample)
    with atomic_run_dir(out_dir, RUN_FILES) as tmp_dir:
        output = _simulate(cfg, workload, progress, uncertainty, resample)
        write_parquet(tmp_dir / "requests.parquet", output.requests)
        if cfg.record_steps:
            write_parquet(tmp_dir / "steps.parquet", output.result.recorder.steps_frame())
        write_json(tmp_dir / "summary.json", output.summary)
    return output


def _simulate(cfg: EngineConfig, workload: Trace | ClosedLoop, progress: Callable[[int, int], None] | None,
              uncertainty: int | None = None,
              resample: Callable[[int], Trace | ClosedLoop] | None = None) -> RunOutput:
    from sim.intervals import prediction_intervals, run_extrapolating

    result = simulate(cfg, workload, progress)
    frame = requests_frame(result)
    summary = summarize(result, frame)
    summary["extrapolating"] = run_extrapolating(cfg)
    if uncertainty is not None:
        summary["intervals"] = prediction_intervals(cfg, workload, uncertainty, resample)
    return RunOutput(result, summary, frame)
