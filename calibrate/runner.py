"""Time every kernel over a grid and collect one measurements row per configuration.

`run_calibration` is the entry point; `write_measurements` writes its frame as the CSV
described in `calibrate.measurements`. On CPU with `quick=True` a dense GQA model is replaced by
the toy model (`kernels.shapes.TOY_DIMS`), and a MoE or MLA model is timed at its real shapes
on one TP 8 shard at M 1 and 16 with operand sets capped (`grids.cpu_quick_grid`): a CPU quick
run checks the pipeline and the shape lists, not the numbers, and must finish in seconds.
Each point is timed eagerly and, on CUDA, from CUDA-graph replays (`calibrate.run_state`).
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import time

import pandas as pd
import torch

from calibrate import grid as grids
from calibrate.measurements import (
    COLUMNS,
    OPTIONAL_COLUMNS,
    SOURCE_RUNNER,
    validate_measurements,
    write_measurements,
)
from calibrate.run_state import TORCH_DTYPES, RunState
from calibrate.time_attention import time_decode, time_prefill
from calibrate.time_gemms import is_large, time_expert_groups, time_gemms
from calibrate.timing import cache_flusher
from kernels.allreduce import measure_allreduce, unavailable_reason
from kernels.shapes import TOY_DIMS, ModelDims, dims_from_spec
from sim.errors import InputError

__all__ = ["run_calibration", "write_measurements"]

log = logging.getLogger(__name__)

FP4_REFUSAL = ("not timed: FP4 GEMMs need torch._scaled_mm's block-scaled FP4 path (Blackwell, compute "
               "capability 10.x); this calibration times bf16, fp16, fp32 or fp8")


def _check_device(device: str) -> str:
    if device == "cpu":
        return device
    if device == "cuda" and torch.cuda.is_available():
        return device
    allowed = "cpu, or cuda when a CUDA GPU is visible" if device == "cuda" else "cpu or cuda"
    raise InputError("--device", device, allowed)


def _provenance(device: str) -> dict:
    name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    now = datetime.datetime.now(datetime.timezone.utc)
    return {
        "device": name,
        "source": SOURCE_RUNNER,
        "torch_version": torch.__version__,
        "date": now.isoformat(timespec="seconds"),
    }


def _time_allreduce(run: RunState) -> None:
    reason = unavailable_reason(run.device)
    if reason is not None or not run.grid.allreduce_payloads_bytes:
        log.info("all-reduce not measured: %s", reason or "no payloads in the grid")
        return
    n_gpus = torch.cuda.device_count()
    for world_size in (tp for tp in run.grid.tps if 2 <= tp <= n_gpus):
        if run.out_of_time():
            continue
        timings = measure_allreduce(
            list(run.grid.allreduce_payloads_bytes), world_size, run.dtype, "nccl",
            run.grid.n_warmup, run.grid.n_repeats,
        )  # fmt: skip
        for t in timings:
            timing = {"time_s": t.time_s, "time_std_s": t.time_std_s, "n_repeats": t.n_repeats,
                      "timing_mode": "eager", "time_eager_s": t.time_s, "time_eager_std_s": t.time_std_s}
            run.add("allreduce", timing, world_size, payload_bytes=t.payload_bytes, kernel="nccl_allreduce")


@contextlib.contextmanager
def _torch_threads(n_threads: int | None):
    """Use `n_threads` intra-op threads inside the block (None: leave as is), then restore."""
    before = torch.get_num_threads()
    if n_threads is not None:
        torch.set_num_threads(n_threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _pick_grid(device: str, quick: bool) -> grids.Grid:
    if quick:
        return grids.cpu_quick_grid() if device == "cpu" else grids.quick_grid()
    return grids.full_grid()


def _models_to_time(model_specs: list, quick: bool, device: str) -> list[ModelDims]:
    """The run's models: on a CPU quick run dense GQA models become `TOY_DIMS` (MoE and MLA
    models keep their shapes, on the CPU grid's TP 8 shard)."""
    models = [dims_from_spec(spec) for spec in model_specs]
    if quick and device == "cpu":
        models = [dims if is_large(dims) else TOY_DIMS for dims in models] or [TOY_DIMS]
        models = list(dict.fromkeys(models))
    if not models:
        raise InputError("run_calibration", "model_specs", "at least one model")
    return models


def _check_dtype(dtype: str) -> None:
    if dtype == "fp4":
        raise InputError("--dtype", dtype, FP4_REFUSAL)
    if dtype not in TORCH_DTYPES:
        raise InputError("--dtype", dtype, f"one of {', '.join(TORCH_DTYPES)}")


def _time_all(run: RunState, models: list[ModelDims], phase_done) -> None:
    time_gemms(run, models)
    time_expert_groups(run, models)
    phase_done(1)
    if run.dtype_name != "fp8":  # fp8 runs time the GEMMs only (attention stays in bf16 in fp8 engines)
        time_prefill(run, models)  # cheap: before decode, so a tight budget keeps it
        phase_done(2)
        time_decode(run, models)
    phase_done(3)


def run_calibration(
    device: str,
    model_specs: list,
    quick: bool,
    dtype: str = "bf16",
    grid: grids.Grid | None = None,
    time_budget_s: float | None = None,
    progress=None,
    notes: list | None = None,
) -> pd.DataFrame:
    """Time GEMMs (plain and grouped experts), decode and prefill attention (and all-reduce on
    >1 GPU) for the models.

    `model_specs`: objects with `sim.inputs.model.ModelSpec`'s attributes, or `ModelDims`.
    `grid` overrides the default (`full_grid`, `quick_grid`, or `cpu_quick_grid` for a CPU
    quick run, which also swaps dense models for `TOY_DIMS` and uses one CPU thread). Once
    `time_budget_s` has passed, remaining points are skipped (counted in the log), so a leased
    GPU run ends with what it has. `notes`, when given, receives one line per thing not timed
    (a shape over the grid's operand cap, a failed graph capture, graphs unavailable on CPU).
    Returns a validated frame in `calibrate.measurements` columns.
    """
    device = _check_device(device)
    _check_dtype(dtype)
    models = _models_to_time(model_specs, quick, device)
    started = time.monotonic()
    deadline = None if time_budget_s is None else started + time_budget_s
    run = RunState(device, dtype, grid or _pick_grid(device, quick), deadline, _provenance(device))
    run.flush = cache_flusher(device)
    torch.manual_seed(0)
    # A CPU quick run's ops are tiny: thread hand-offs would dominate, and on a busy
    # machine (a test suite) they stall, so it runs on one thread.
    quick_cpu_threads = 1 if quick and device == "cpu" else None

    def phase_done(n_done: int) -> None:  # `progress(stage, done, total)` per kernel family, if given
        if progress is not None:
            progress("timing kernels (GEMM, prefill, decode, all-reduce)", n_done, 4)

    phase_done(0)
    with torch.inference_mode(), _torch_threads(quick_cpu_threads):
        _time_all(run, models, phase_done)
    _time_allreduce(run)
    phase_done(4)
    log.info(
        "calibration: %d points in %.1f s, %d skipped past the time budget",
        len(run.rows), time.monotonic() - started, run.n_skipped,
    )  # fmt: skip
    if notes is not None:
        notes.extend(([run.graph_reason] if run.graph_reason else []) + run.skipped_shapes)
    if not run.rows and deadline is not None:
        raise InputError("--time-budget-s", None, f"{time_budget_s:g} s ran out before the first point was timed "
                                                  "(nothing measured): a longer budget")
    frame = pd.DataFrame(run.rows, columns=list(COLUMNS + OPTIONAL_COLUMNS))
    return validate_measurements(frame, "run_calibration")
