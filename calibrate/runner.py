"""Time every kernel over a grid and collect one measurements row per configuration.

`run_calibration` is the entry point; `write_measurements` writes its frame as the CSV
described in `calibrate.measurements`. On CPU with `quick=True` the run measures the toy
model (`kernels.shapes.TOY_DIMS`) whatever specs are passed: a CPU quick run checks the
pipeline, not the numbers, and must finish in seconds.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import time
from dataclasses import dataclass, field

import pandas as pd
import torch

from calibrate import grid as grids
from calibrate.measurements import (
    COLUMNS,
    SOURCE_RUNNER,
    empty_row,
    validate_measurements,
    write_measurements,
)
from calibrate.timing import Timing, cache_bytes, cache_flusher, n_copies_to_rotate, time_op
from kernels import gemm, prefill_attention
from kernels import paged_attention as paged
from kernels import paged_attention_triton as paged_triton
from kernels.allreduce import measure_allreduce, unavailable_reason
from kernels.shapes import (
    TOY_DIMS,
    ModelDims,
    attention_heads,
    dims_from_spec,
    shapes_for,
    shardable,
)
from sim.errors import InputError

__all__ = ["run_calibration", "write_measurements"]

log = logging.getLogger(__name__)

TORCH_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp8": gemm.FP8_DTYPE}


@dataclass
class _Run:
    """What every measurement of one run shares."""

    device: str
    dtype_name: str
    grid: grids.Grid
    deadline: float | None  # time.monotonic() value after which remaining points are skipped
    provenance: dict
    flush: object = None
    n_skipped: int = 0
    rows: list = field(default_factory=list)

    @property
    def dtype(self) -> torch.dtype:
        return TORCH_DTYPES[self.dtype_name]

    def out_of_time(self) -> bool:
        if self.deadline is not None and time.monotonic() > self.deadline:
            self.n_skipped += 1
            return True
        return False

    def add(self, op: str, timing: Timing, tp: int, **fields) -> None:
        row = empty_row() | fields | self.provenance
        row.update(op=op, tp=tp, dtype=self.dtype_name, time_s=timing.time_s)
        row.update(time_std_s=timing.time_std_s, n_repeats=timing.n_repeats)
        self.rows.append(row)

    def time_rotating(self, make_inputs, n_bytes: int, run) -> Timing:
        """Time `run` over enough fresh `make_inputs()` copies to overflow the cache; flush
        between calls too when the copies alone are too few (CUDA)."""
        grid = self.grid
        n_copies = n_copies_to_rotate(
            n_bytes, self.device, grid.rotation_budget_bytes, grid.max_rotation_copies
        )
        input_sets = [make_inputs() for _ in range(n_copies)]
        between = self.flush if n_copies * n_bytes < 2 * cache_bytes(self.device) else None
        return time_op(run, input_sets, self.device, grid.n_warmup, grid.n_repeats, between)


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


def _gemm_points(models: list[ModelDims], tps: tuple[int, ...]):
    """Distinct (tp, GemmShape) over the models; a shape two models share is timed once."""
    seen = set()
    for dims in models:
        for tp in tps:
            if not shardable(dims, tp):
                continue
            for shape in shapes_for(dims, tp):
                if (tp, shape) not in seen:
                    seen.add((tp, shape))
                    yield tp, shape


def _time_gemms(run: _Run, models: list[ModelDims]) -> None:
    """bf16/fp16/fp32 through `linear`; fp8 through `torch._scaled_mm` (M padded to 16, as
    fp8 engines pad; the row keeps the real M)."""
    fp8 = run.dtype_name == "fp8"
    for tp, shape in _gemm_points(models, run.grid.tps):
        for m_tokens in run.grid.m_tokens:
            if run.out_of_time():
                continue
            if fp8:
                n_bytes = (gemm.fp8_padded_m(m_tokens) + shape.n_out) * shape.k_in

                def make_inputs(m=m_tokens, n=shape.n_out, k=shape.k_in):
                    return gemm.make_fp8_gemm_inputs(m, n, k, run.device)
            else:
                n_bytes = gemm.gemm_bytes(m_tokens, shape.n_out, shape.k_in, run.dtype)

                def make_inputs(m=m_tokens, n=shape.n_out, k=shape.k_in):
                    return gemm.make_gemm_inputs(m, n, k, run.dtype, run.device)

            op = gemm.fp8_projection if fp8 else gemm.projection
            timing = run.time_rotating(make_inputs, n_bytes, op)
            run.add(shape.op, timing, tp, m_tokens=m_tokens, n_out=shape.n_out, k_in=shape.k_in)


def _distinct_heads(models: list[ModelDims], tps: tuple[int, ...]):
    """Distinct (tp, AttentionHeads) over the models."""
    seen = set()
    for dims in models:
        for tp in tps:
            heads = attention_heads(dims, tp) if shardable(dims, tp) else None
            if heads is not None and heads not in seen:
                seen.add(heads)
                yield tp, heads


def _decode_impl(device: str):
    if device == "cuda" and paged_triton.triton_available():
        return paged_triton.paged_decode_attention_triton
    return paged.paged_decode_attention_torch


def _time_decode(run: _Run, models: list[ModelDims]) -> None:
    decode = _decode_impl(run.device)
    for tp, heads in _distinct_heads(models, run.grid.tps):
        scale = heads.head_dim**-0.5
        for block_size, batch_size, context_len in run.grid.decode_points():
            if run.out_of_time():
                continue

            def make_inputs(b=block_size, n=batch_size, c=context_len, h=heads):
                return paged.random_paged_batch(
                    [c] * n, b, h.n_heads, h.n_kv_heads, h.head_dim, run.dtype, run.device
                )

            def run_decode(batch, scale=scale):
                return decode(batch, scale)

            probe = make_inputs()
            timing = run.time_rotating(make_inputs, probe.n_bytes, run_decode)
            run.add(
                "decode_attention", timing, tp,
                m_tokens=batch_size, batch_size=batch_size, context_tokens=float(context_len),
                block_size=block_size, n_heads=heads.n_heads, n_kv_heads=heads.n_kv_heads,
                head_dim=heads.head_dim,
            )  # fmt: skip


def _time_prefill(run: _Run, models: list[ModelDims]) -> None:
    for tp, heads in _distinct_heads(models, run.grid.tps):
        for batch_size, seq_len in run.grid.prefill_points():
            if run.out_of_time():
                continue

            def make_inputs(b=batch_size, s=seq_len, h=heads):
                return prefill_attention.make_prefill_inputs(
                    b, s, h.n_heads, h.n_kv_heads, h.head_dim, run.dtype, run.device
                )

            n_bytes = make_inputs().n_bytes
            timing = run.time_rotating(make_inputs, n_bytes, prefill_attention.prefill_attention)
            run.add(
                "prefill_attention", timing, tp,
                m_tokens=batch_size * seq_len, batch_size=batch_size,
                context_tokens=float(seq_len), n_heads=heads.n_heads,
                n_kv_heads=heads.n_kv_heads, head_dim=heads.head_dim,
            )  # fmt: skip


def _time_allreduce(run: _Run) -> None:
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
            timing = Timing(t.time_s, t.time_std_s, t.n_repeats)
            run.add("allreduce", timing, world_size, payload_bytes=t.payload_bytes)


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


def run_calibration(
    device: str,
    model_specs: list,
    quick: bool,
    dtype: str = "bf16",
    grid: grids.Grid | None = None,
    time_budget_s: float | None = None,
    progress=None,
) -> pd.DataFrame:
    """Time GEMMs, decode and prefill attention (and all-reduce on >1 GPU) for the models.

    `model_specs`: objects with `sim.model.ModelSpec`'s attributes, or `ModelDims`.
    `grid` overrides the default (`full_grid`, `quick_grid`, or `cpu_quick_grid` for a CPU
    quick run, which also swaps the models for `TOY_DIMS` and uses one CPU thread). Once `time_budget_s` has
    passed, remaining points are skipped (counted in the log), so a leased GPU run ends
    with what it has. Returns a validated frame in `calibrate.measurements` columns.
    """
    device = _check_device(device)
    if dtype not in TORCH_DTYPES:
        raise InputError("--dtype", dtype, f"one of {', '.join(TORCH_DTYPES)}")
    models = [dims_from_spec(spec) for spec in model_specs]
    if quick and device == "cpu":
        models = [TOY_DIMS]
    if not models:
        raise InputError("run_calibration", "model_specs", "at least one model")
    started = time.monotonic()
    deadline = None if time_budget_s is None else started + time_budget_s
    run = _Run(device, dtype, grid or _pick_grid(device, quick), deadline, _provenance(device))
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
        _time_gemms(run, models)
        phase_done(1)
        if dtype != "fp8":  # fp8 runs time the GEMMs only (attention stays in bf16 in fp8 engines)
            _time_prefill(run, models)  # cheap: before decode, so a tight budget keeps it
            phase_done(2)
            _time_decode(run, models)
        phase_done(3)
    _time_allreduce(run)
    phase_done(4)
    log.info(
        "calibration: %d points in %.1f s, %d skipped past the time budget",
        len(run.rows), time.monotonic() - started, run.n_skipped,
    )  # fmt: skip
    if not run.rows and deadline is not None:
        raise InputError("--time-budget-s", None, f"{time_budget_s:g} s ran out before the first point was timed "
                                                  "(nothing measured): a longer budget")
    return validate_measurements(pd.DataFrame(run.rows, columns=list(COLUMNS)), "run_calibration")
