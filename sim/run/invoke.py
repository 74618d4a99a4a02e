"""A whole run as users invoke it: load the workload, simulate, tabulate, write the files."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from sim.errors import InputError
from sim.inputs.budget import MAX_ROWS, MAX_TIME_S, check_rate_qps
from sim.inputs.config import EngineConfig
from sim.inputs.slo import PlanSLO, slo_report
from sim.inputs.workload import load_workload
from sim.inputs.workload.load import spec_seed
from sim.inputs.workload.synthetic.arrivals import arrival_times_s
from sim.inputs.workload.trace import ClosedLoop, Trace
from sim.inputs.workload.transforms import scale_rate
from sim.output import check_file_target, staged_files, write_columns_parquet, write_json, write_parquet
from sim.run.energy_summary import DEFAULT_PUE, DEFAULT_USD_PER_KWH
from sim.run.folder import atomic_run_dir
from sim.run.provenance import provenance, trace_sha256
from sim.run.replica_split import simulate_cluster
from sim.run.simulate import SimResult
from sim.run.summary import DEFAULT_PERCENTILES, requests_columns, summarize

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_TRACE = "splitwise_conv"
RUN_FILES = ("summary.json", "requests.parquet", "steps.parquet", "bench_serve.json")  # what a run folder may hold


@dataclass
class RunOutput:
    result: SimResult
    summary: dict
    columns: dict  # the requests table (sim.run.summary.requests_columns)

    @cached_property
    def requests(self) -> pd.DataFrame:
        """The requests table as a DataFrame (built on first use: writing a run does not need it)."""
        import pandas as pd

        return pd.DataFrame(self.columns)


def resolve_seed(cfg: EngineConfig, trace: str | None, fmt: str | None = None) -> EngineConfig:
    """The run's seed: an explicit one (--seed, or `seed:` in the config YAML) wins; else the
    workload spec's `seed:`; else 0. The one seed drives both the workload and the simulation."""
    if "seed" in cfg.model_fields_set:
        return cfg
    seed = spec_seed(trace or DEFAULT_TRACE, fmt)
    return cfg if seed is None else cfg.model_copy(update={"seed": seed})


def load_run_workload(trace: str | None, fmt: str | None = None, rate_scale: float | None = None,
                      max_requests: int | None = None, seed: int = 0, qps: float | None = None) -> Trace | ClosedLoop:
    """The workload of a run: a trace/spec path or bundled name, optionally cut, then sped up
    (`rate_scale`) or given Poisson arrivals at `qps` req/s (its lengths kept, in order)."""
    if max_requests is not None and not 1 <= max_requests <= MAX_ROWS:
        raise InputError("--max-requests", None, f"must be in [1, {MAX_ROWS:,}]; got {max_requests}")
    if rate_scale is not None and qps is not None:
        raise InputError("--qps", None, "give at most one of --qps and --rate-scale")
    workload = load_workload(trace or DEFAULT_TRACE, fmt, seed=seed)
    return _cut(workload, max_requests, rate_scale, qps, seed)


def without_unread_prefix_ids(cfg: EngineConfig, workload: Trace | ClosedLoop) -> Trace | ClosedLoop:
    """The workload without its prefix hash ids when cfg's run never reads them (they are ~2/3 of a
    synthetic trace's memory: 560 MiB of 1M ShareGPT-length requests); summaries keep its hash."""
    if isinstance(workload, ClosedLoop) or not workload.has_hash_ids or cfg.reads_prefix_ids():
        return workload
    return workload.without_prefix_ids(trace_sha256(workload))


def is_synthetic(trace: str | None, fmt: str | None = None) -> bool:
    """Whether the workload's arrivals come from the seed (a spec YAML or a length-only trace)."""
    from sim.inputs.workload.bundled import resolve_workload
    from sim.inputs.workload.sniff import sniff_format

    return (fmt or sniff_format(resolve_workload(trace or DEFAULT_TRACE))) in ("spec", "lengths")


def _cut(workload: Trace | ClosedLoop, max_requests: int | None, rate_scale: float | None,
         qps: float | None = None, seed: int = 0) -> Trace | ClosedLoop:
    if isinstance(workload, ClosedLoop):
        if qps is not None:
            raise InputError("--qps", None, "a closed-loop workload sets its own arrivals; give a trace")
        return workload
    if max_requests is not None:
        workload = workload.take(range(min(max_requests, len(workload))))
    if rate_scale is not None:
        if not (math.isfinite(rate_scale) and rate_scale > 0):
            raise InputError("--rate-scale", None, f"must be a finite number > 0; got {rate_scale}")
        workload = scale_rate(workload, rate_scale, where="--rate-scale")
    if qps is not None:
        workload = poisson_arrivals(workload, qps, seed)
    return workload


def poisson_arrivals(trace: Trace, qps: float, seed: int) -> Trace:
    """The same requests (lengths, order, prefixes) arriving as a Poisson process of `qps` req/s."""
    check_rate_qps(qps, "--qps", also=", or inf (all at t = 0)")
    timed = trace.take(np.arange(len(trace)))
    with np.errstate(over="ignore"):
        timed.arrival_s = arrival_times_s(np.random.default_rng(seed), "poisson", qps, n=len(trace))
    if not timed.arrival_s.max() <= MAX_TIME_S:
        raise InputError("--qps", None, f"{qps:g} req/s spreads {len(trace):,} requests over more than "
                                        f"{MAX_TIME_S:g} s of simulated time; give a higher rate")
    return timed


def run(cfg: EngineConfig, workload: Trace | ClosedLoop, out_dir: Path | None = None,
        progress: Callable[[int, int], None] | None = None, uncertainty: int | None = None,
        resample: Callable[[int], Trace | ClosedLoop] | None = None, percentiles=DEFAULT_PERCENTILES,
        slo: PlanSLO | None = None, csv_path: Path | None = None, workers: int = 1, backend: str = "local",
        address: str | None = None, detailed_bench: bool = False,
        electricity: tuple[float, float] = (DEFAULT_USD_PER_KWH, DEFAULT_PUE)) -> RunOutput:
    """Simulate and, with `out_dir`, write summary.json, requests.parquet (and steps.parquet);
    with `csv_path`, the requests table as CSV too. The summary carries the tool version, the
    effective config, the workload's path, hash and size, the seed and, with `slo`, `slo_attainment`
    (sim.inputs.slo.slo_report over every request).

    The folder is replaced whole (see `sim.run.folder.atomic_run_dir`): its parent's writability is
    checked before simulating, and a failed or killed run leaves an earlier run's folder as it was.
    summary.json carries `extrapolating` (sim/run/intervals.py); with `uncertainty` = N it also
    carries `intervals` from N perturbed replays (`resample(seed)` re-draws synthetic arrivals).
    `workers` > 1 spreads the replicas (sim.run.replica_split) and the perturbed replays over that many
    processes of `backend` (local | ray, at `address`); the output is the same. `detailed_bench`:
    bench_serve.json also holds the per-request `itls` (vLLM's --save-detailed). `electricity`:
    ($ per kWh, PUE) that price summary.json's `energy` (sim/run/energy_summary.py)."""
    from sim.run.backends import make_backend  # here: sim.sweep imports this module
    from sim.run.bench_result import vllm_bench_result  # bench_serve.json: shaped like vllm bench serve's result
    from sim.run.intervals import check_replays

    idle = cfg.idle_knob()
    if idle is not None:
        knob, needs = idle
        flag = (f"--{knob}-hardware/--{knob}-tp/--{knob}-policy" if knob in ("prefill", "decode")
                else f"--{knob.replace('_', '-')}")
        raise InputError(flag, None, f"has no effect without {needs}: give them or drop it")
    if uncertainty is not None:
        check_replays(uncertainty, _n_requests(workload))
    if csv_path is not None:
        check_file_target(csv_path, "--csv")
    runner = make_backend(backend, workers, address)
    with staged_files() as stage:  # the CSV is written before the folder is published, renamed after
        if out_dir is None:
            output = _simulate(cfg, workload, progress, uncertainty, resample, percentiles, slo, runner,
                               detailed_bench, electricity)
            _stage_csv(stage, csv_path, output)
        else:
            with atomic_run_dir(out_dir, RUN_FILES) as tmp_dir:
                output = _simulate(cfg, workload, progress, uncertainty, resample, percentiles, slo, runner,
                                   detailed_bench, electricity)
                write_columns_parquet(tmp_dir / "requests.parquet", output.columns)
                if cfg.record_steps:
                    write_parquet(tmp_dir / "steps.parquet", output.result.recorder.steps_frame())
                write_json(tmp_dir / "summary.json", output.summary)
                write_json(tmp_dir / "bench_serve.json", vllm_bench_result(output.result, output.columns,
                                                                         output.summary, detailed_bench))
                _stage_csv(stage, csv_path, output)
    return output


def _n_requests(workload: Trace | ClosedLoop) -> int:
    return len(workload.pool if isinstance(workload, ClosedLoop) else workload)


def _stage_csv(stage, csv_path: Path | None, output: RunOutput) -> None:
    if csv_path is not None:
        stage(csv_path, lambda tmp: output.requests.to_csv(tmp, index=False))


def _simulate(cfg: EngineConfig, workload: Trace | ClosedLoop, progress: Callable[[int, int], None] | None,
              uncertainty: int | None, resample: Callable[[int], Trace | ClosedLoop] | None,
              percentiles, slo: PlanSLO | None, backend, request_gaps: bool = False,
              electricity: tuple[float, float] = (DEFAULT_USD_PER_KWH, DEFAULT_PUE)) -> RunOutput:
    from sim.run.intervals import prediction_intervals, run_extrapolating
    from sim.run.load_check import queue_growth, rejections

    with backend:
        result = simulate_cluster(cfg, workload, backend, progress, request_gaps)
        if not result.sim_duration_s <= MAX_TIME_S:  # every input in range, their product not: refuse, never report
            raise InputError("the run", None, f"its simulated clock reached {result.sim_duration_s:g} s, past "
                                              f"{MAX_TIME_S:g} s: a rate, bandwidth or time among the inputs is out "
                                              "of scale (e.g. --kv-transfer-gb-s, --rate-scale, --qps)")
        columns = requests_columns(result)
        summary = summarize(result, columns, percentiles, electricity)
        summary["slo_attainment"] = None if slo is None else slo_report(columns, slo, result.sim_duration_s)
        summary.update(provenance(cfg, workload))
        summary["extrapolating"] = run_extrapolating(cfg)
        summary["overload"], summary["rejections"] = queue_growth(columns), rejections(columns)
        if summary["slo_attainment"] is not None and summary["overload"]["overloaded"]:
            # a queue that grows for the whole run meets no SLO at steady state, whatever this run's length shows
            summary["slo_attainment"].update(met=False, met_on_this_run=summary["slo_attainment"]["met"],
                                             not_met_because="the offered load exceeds capacity (overload)")
        if uncertainty is not None:
            run_tasks = backend.run_tasks if backend.workers > 1 else None
            summary["intervals"] = prediction_intervals(cfg, workload, uncertainty, resample, run_tasks)
    return RunOutput(result, summary, columns)
