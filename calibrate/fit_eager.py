"""Fits for rows timed by `calibrate run` on a GPU, whose times hold the host's dispatch floor where
they were timed host-bound (calibrate/timing_harness.py): the kernel and the floor apart.

GEMM (`fit_gemm_eager`): measured = max(floor, kernel) on host-bound rows, kernel elsewhere, with

    kernel = blend(compute over whole waves of output tiles, weights + activations / (bw * memory)) + launch

(sim/cost/roofline.py `gemm_compute_flops`: tiles of gemm_tile_tokens x gemm_tile_n over
gemm_wave_slots = the profile's compute.n_sms). Fitted: a compute ceiling per op class, memory,
roofline_blend, kernel_launch_us and the floor (`eager_gemm_floor_us`); the compute ramp
(gemm_half_tokens, gemm_half_output_elems) is off (the waves carry the small-M loss); the tile is picked
by the lowest loss over `WAVE_TILES` (None: no waves). Why max and not floor + kernel: on the H200 run a
GEMV that streams 117 MB of weights (28 us at 4.2 TB/s) takes 33-34 us, not floor (~30) + 28: the host
dispatches the next call while the kernel runs, so only kernels shorter than the host loop show it.

Prefill attention (`fit_prefill_eager`): attention_compute and the floor of the prefill call
(`calibration.timing_floor_us.prefill_attention`, a property of the timing, used by `calibrate report`).
The simulator applies `eager_gemm_floor_us` only to steps outside a CUDA graph (sim/inputs/engines/eager.py).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from calibrate.fit_solve import FLOOR, MIN_EFFICIENCY, PER_OP, Term, rows_mape, solve, with_terms
from calibrate.measurements import GEMM_OPS, SOURCE_RUNNER
from calibrate.timing_harness import host_bound
from sim.inputs.hardware import HardwareProfile
from sim.schema import plausible_ranges

# (tile rows, tile columns): CUTLASS / cuBLAS Hopper tile shapes; None: no wave quantization
WAVE_TILES = (None, (64, 64), (64, 128), (128, 64), (128, 128), (128, 256))
_EFF = dict(log=True, low=MIN_EFFICIENCY, high=1.0)
KERNEL_US_MAX = plausible_ranges()["kernel_us"]["max"]  # a fit stays within what a profile may hold
FLOOR_TERM = Term("eager_gemm_floor_us", log=False, low=0.0, high=KERNEL_US_MAX)
KERNEL_TERMS = [
    Term("memory", **_EFF),
    Term("roofline_blend", log=False, low=1.0, high=64.0),
    Term("kernel_launch_us", log=False, low=0.0, high=KERNEL_US_MAX),
]
EAGER_GEMM_KEYS = ["gemm_compute_max", "gemm_compute_max_by_op", "memory", "roofline_blend", "kernel_launch_us",
                   "eager_gemm_floor_us", "gemm_tile_tokens", "gemm_tile_n", "gemm_wave_slots", "gemm_half_tokens",
                   "gemm_half_output_elems"]  # fmt: skip


def timed_on_gpu_by_runner(rows: pd.DataFrame) -> bool:
    """True when any row is a `calibrate run` timing on a GPU (the rows this module's fits are for)."""
    return bool(((rows["source"].astype(str) == SOURCE_RUNNER) & (rows["device"].astype(str) != "cpu")).any())


def _tile_fixed(tile, n_sms: int | None) -> dict | None:
    if tile is None:
        return {"gemm_tile_tokens": None, "gemm_tile_n": None, "gemm_wave_slots": None}
    if n_sms is None:
        return None
    return {"gemm_tile_tokens": tile[0], "gemm_tile_n": tile[1], "gemm_wave_slots": n_sms}


def fit_gemm_eager(rows: pd.DataFrame, hw: HardwareProfile) -> tuple[HardwareProfile, dict]:
    """The GEMM terms above, on `rows` (GEMM rows only). Wave tiles are tried only when the profile
    gives compute.n_sms; the floor is fitted only when some row was timed host-bound."""
    ceilings = [Term(PER_OP + op, **_EFF) for op in GEMM_OPS if (rows["op"] == op).any()]
    terms = ceilings + KERNEL_TERMS + ([FLOOR_TERM] if host_bound(rows).any() else [])
    ramp_off = {"gemm_half_tokens": 0.0, "gemm_half_output_elems": None}
    if FLOOR_TERM not in terms:
        ramp_off["eager_gemm_floor_us"] = None
    fits = []
    for tile in WAVE_TILES:
        fixed = _tile_fixed(tile, hw.compute.n_sms)
        if fixed is not None:
            fits.append(solve(rows, hw, terms, fixed | ramp_off))
    best, _ = min(fits, key=lambda fit: fit[1])
    by_op = best.efficiency.gemm_compute_max_by_op or {}
    best = with_terms(best, {"gemm_compute_max": float(np.mean([by_op[t.key[len(PER_OP):]] for t in ceilings]))})
    return best, {key: getattr(best.efficiency, key) for key in EAGER_GEMM_KEYS}


def fit_prefill_eager(rows: pd.DataFrame, hw: HardwareProfile) -> tuple[HardwareProfile, dict]:
    """attention_compute, and the prefill call's host floor when some row was timed host-bound."""
    terms = [Term("attention_compute", **_EFF)]
    if host_bound(rows).any():
        terms.append(Term(FLOOR + "prefill_attention", log=False, low=0.0, high=1e4))
    fitted, _ = solve(rows, hw, terms)
    out = {"attention_compute": fitted.efficiency.attention_compute}
    floors = (fitted.calibration or {}).get("timing_floor_us") or {}
    if "prefill_attention" in floors:
        out["timing_floor_us.prefill_attention"] = floors["prefill_attention"]
    return fitted, out


def floor_bound_rows(frame: pd.DataFrame, hw: HardwareProfile) -> np.ndarray:
    """Per row: True where the timing shows the host floor rather than the kernel (host-bound and the
    fitted kernel shorter than the floor): such a time says only kernel <= floor, so no measured
    table may hold it (the simulator's graph replays would pay the floor)."""
    from calibrate.predict import kernel_times_s, timing_floors_s

    return host_bound(frame) & (kernel_times_s(frame, hw) < timing_floors_s(frame, hw))


DECODE_KERNEL = ("infersim's own paged decode kernel (kernels/paged_attention_triton.py, one program per sequence "
                 "and query head); vLLM, SGLang and TensorRT-LLM run FlashAttention / FlashInfer / XQA decode kernels")


def decode_kernel_fit(rows: pd.DataFrame, hw: HardwareProfile) -> dict:
    """The decode rows' own fit (paged_attention_memory per block size and the call's host floor), kept
    apart: `calibrate report` scores it, the simulator never uses it (`used_by_simulator: false`)."""
    blocks = sorted(int(b) for b in rows["block_size"].dropna().unique())
    terms = [Term(f"paged_attention_memory.{b}", **_EFF) for b in blocks]
    if host_bound(rows).any():
        terms.append(Term(FLOOR + "decode_attention", log=False, low=0.0, high=1e4))
    fitted, _ = solve(rows, hw, terms)
    values = {f"paged_attention_memory.{b}": fitted.efficiency.paged_attention_memory[b] for b in blocks}
    floors = (fitted.calibration or {}).get("timing_floor_us") or {}
    if "decode_attention" in floors:
        values["timing_floor_us.decode_attention"] = floors["decode_attention"]
    return {"kernel": DECODE_KERNEL, "used_by_simulator": False, "n_rows": len(rows),
            "mape": round(rows_mape(rows, fitted), 5), "terms": values}  # fmt: skip
