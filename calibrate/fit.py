"""Fit the cost model's efficiency terms to measurements, one op class at a time.

Each class is a small least-squares problem (`scipy.optimize.least_squares`, soft-L1 loss on the
relative residual predicted/measured - 1, so the fit targets percentage error and a few outlier
kernels, e.g. a cuBLAS heuristic's bad pick, do not drag it), solved in this order:

| class | rows | terms fitted |
|---|---|---|
| gemm | qkv_proj, o_proj, gate_up_proj, down_proj, lm_head | gemm_compute_max_by_op (one ceiling per op |
|  |  | class measured), gemm_half_tokens, gemm_half_output_elems, memory, roofline_blend, |
|  |  | kernel_launch_us; gemm_tile_tokens picked from (none, 64, 128) |
| prefill_attention | prefill_attention | attention_compute |
| decode_attention | decode_attention | paged_attention_memory[B] for each block size B measured |
| collectives | allreduce, send_recv | `collectives`: latency + payload / bandwidth per (op, TP) |
|  |  | (calibrate/fit_collectives.py) |

With `tables=True` (the default) the GEMM rows also become measured tables
(`calibration.tables.gemm`, calibrate/fit_tables.py): simulated GEMMs of a measured shape are
then answered by the table, and the smooth fit predicts the shapes no one measured.
Rows timed by `calibrate run` on a GPU are fitted as calibrate/fit_eager.py says: GEMM kernel time and
the host's dispatch floor apart (with wave quantization), prefill attention with its floor; their
decode attention times our Triton kernel, not an engine's, so `paged_attention_memory` stays the
base's and that kernel's fit is kept aside (`FitResult.kernel_fits`, written to
`calibration.kernel_fits`, never simulated). Points that show only the floor are left out of the tables.
Later classes see the earlier fits (attention uses the fitted memory efficiency, blend and
launch). A class without rows keeps the base profile's terms, as do step_overhead_us (no kernel
measures it) and block sizes no row measured; `FitResult.kept` lists them.
Efficiencies are searched in log space within (1e-6, 1], so a fit can never claim more than peak.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from calibrate.fit_collectives import fit_collectives
from calibrate.fit_eager import (
    KERNEL_US_MAX,
    decode_kernel_fit,
    fit_gemm_eager,
    fit_prefill_eager,
    floor_bound_rows,
    timed_on_gpu_by_runner,
)
from calibrate.fit_solve import MIN_EFFICIENCY, PER_OP, Term, rows_mape, solve, with_terms
from calibrate.fit_tables import attention_ratio_entries, gemm_table_entries
from calibrate.measurements import COLLECTIVE_OPS, GEMM_OPS
from sim.errors import InputError
from sim.inputs.hardware import Collectives, HardwareProfile

TILE_CANDIDATES = (None, 64, 128)


@dataclass(frozen=True)
class ClassFit:
    """One op class's fit: rows used, fitted terms (profile key -> value), in-sample MAPE."""

    name: str
    n_rows: int
    terms: dict
    mape: float


@dataclass
class FitResult:
    hardware: HardwareProfile
    classes: list[ClassFit] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    tables: list[dict] = field(default_factory=list)  # calibration.tables.gemm entries
    attention_tables: list[dict] = field(default_factory=list)  # calibration.tables.attention entries
    collective_residuals: dict = field(default_factory=dict)
    # op class -> fit of a timed kernel the engines do not run (calibration.kernel_fits; not simulated)
    kernel_fits: dict = field(default_factory=dict)


_EFF = dict(log=True, low=MIN_EFFICIENCY, high=1.0)
GEMM_TERMS = [
    Term("gemm_half_tokens", log=False, low=0.0, high=1e5),
    Term("gemm_half_output_elems", log=True, low=1.0, high=1e9),
    Term("memory", **_EFF),
    Term("roofline_blend", log=False, low=1.0, high=64.0),
    Term("kernel_launch_us", log=False, low=0.0, high=KERNEL_US_MAX),
]
GEMM_KEYS = ["gemm_compute_max", "gemm_compute_max_by_op"] + [t.key for t in GEMM_TERMS] + ["gemm_tile_tokens"]


def _fit_gemm(rows: pd.DataFrame, hw: HardwareProfile) -> tuple[HardwareProfile, dict]:
    """Rows timed by `calibrate run` on a GPU: the floor and wave model (calibrate/fit_eager.py).
    Otherwise: GEMM terms: a compute ceiling per op class present in `rows` (gemm_compute_max_by_op),
    the shared ramp / occupancy / memory / blend / launch terms; the tile size is picked by the
    lowest loss over `TILE_CANDIDATES`. gemm_compute_max (for classes without their own ceiling,
    e.g. MoE experts) becomes the mean of the fitted ceilings."""
    if timed_on_gpu_by_runner(rows):
        return fit_gemm_eager(rows, hw)
    ceilings = [Term(PER_OP + op, **_EFF) for op in GEMM_OPS if (rows["op"] == op).any()]
    fits = [solve(rows, hw, ceilings + GEMM_TERMS, {"gemm_tile_tokens": tile}) for tile in TILE_CANDIDATES]
    best, _ = min(fits, key=lambda fit: fit[1])
    by_op = best.efficiency.gemm_compute_max_by_op or {}
    if by_op:
        best = with_terms(best, {"gemm_compute_max": float(np.mean(list(by_op.values())))})
    return best, {key: getattr(best.efficiency, key) for key in GEMM_KEYS}


def _fit_prefill(rows: pd.DataFrame, hw: HardwareProfile) -> tuple[HardwareProfile, dict]:
    if timed_on_gpu_by_runner(rows):
        return fit_prefill_eager(rows, hw)
    fitted, _ = solve(rows, hw, [Term("attention_compute", **_EFF)])
    return fitted, {"attention_compute": fitted.efficiency.attention_compute}


def _fit_decode(rows: pd.DataFrame, hw: HardwareProfile) -> tuple[HardwareProfile, dict]:
    terms = {}
    for block_size, block_rows in rows.groupby("block_size"):
        key = f"paged_attention_memory.{int(block_size)}"
        hw, _ = solve(block_rows, hw, [Term(key, **_EFF)])
        terms[key] = hw.efficiency.paged_attention_memory[int(block_size)]
    return hw, terms


def _fit_collectives(rows: pd.DataFrame, hw: HardwareProfile) -> tuple[HardwareProfile, dict]:
    """Per (op, TP) link fits, merged over the base profile's collectives (a measured TP size
    replaces the base's; the `custom` kind and bridge numbers are kept)."""
    fitted, _ = fit_collectives(rows)
    base = hw.collectives.model_dump() if hw.collectives is not None else {"allreduce": {}}
    merged = dict(base)
    merged["allreduce"] = dict(base.get("allreduce") or {})
    for kind, per_tp in fitted.get("allreduce", {}).items():
        merged["allreduce"][kind] = dict(merged["allreduce"].get(kind) or {}) | per_tp
    if "send_recv" in fitted:
        merged["send_recv"] = fitted["send_recv"]
    collectives = Collectives.model_validate(merged)
    return hw.model_copy(update={"collectives": collectives}), fitted


CLASSES = (
    ("gemm", GEMM_OPS, _fit_gemm, GEMM_KEYS),
    ("prefill_attention", ("prefill_attention",), _fit_prefill, ["attention_compute"]),
    ("decode_attention", ("decode_attention",), _fit_decode, ["paged_attention_memory"]),
    ("collectives", COLLECTIVE_OPS, _fit_collectives, ["collectives"]),
)


def fit_profile(frame: pd.DataFrame, base: HardwareProfile, tables: bool = True) -> FitResult:
    """Fit every op class that has rows in `frame` (a validated measurements frame).

    Returns the base profile with fitted terms, per-class fits, the list of terms kept from
    the base and (with `tables`) the measured GEMM tables, which the returned profile carries
    in `calibration.tables`. Raises InputError when the frame has no rows at all."""
    if frame.empty:
        raise InputError("measurements", None, "at least one measurement row")
    smooth_base = base.model_copy(update={"calibration": None})  # the smooth fit must not see old tables
    result = FitResult(hardware=smooth_base)
    for name, ops, fit, term_keys in CLASSES:
        rows = frame[frame["op"].isin(ops)].reset_index(drop=True)
        if name == "decode_attention" and timed_on_gpu_by_runner(rows):
            result.kernel_fits["decode_attention"] = decode_kernel_fit(rows, result.hardware)
            rows = rows.iloc[:0]  # the engines do not run this kernel: keep the base's term
        if rows.empty:
            result.kept += term_keys
            continue
        result.hardware, terms = fit(rows, result.hardware)
        result.classes.append(ClassFit(name, len(rows), terms, rows_mape(rows, result.hardware)))
    decode_fitted = any(c.name == "decode_attention" for c in result.classes)
    measured_blocks = set(frame.loc[frame["op"] == "decode_attention", "block_size"].dropna().astype(int))
    measured_blocks = measured_blocks if decode_fitted else set()
    unmeasured = sorted(set(base.efficiency.paged_attention_memory) - measured_blocks)
    if measured_blocks and unmeasured:
        result.kept += [f"paged_attention_memory.{b}" for b in unmeasured]
    result.kept.append("step_overhead_us")
    collective_rows = frame[frame["op"].isin(COLLECTIVE_OPS)]
    if not collective_rows.empty:
        result.collective_residuals = fit_collectives(collective_rows.reset_index(drop=True))[1]
    if tables:
        kernel_visible = frame[~floor_bound_rows(frame, result.hardware)]
        if "decode_attention" in result.kernel_fits:
            kernel_visible = kernel_visible[kernel_visible["op"] != "decode_attention"]
        result.tables = gemm_table_entries(kernel_visible)
        result.attention_tables = attention_ratio_entries(kernel_visible, result.hardware)
        stored = {"gemm": result.tables} if result.tables else {}
        if result.attention_tables:
            stored["attention"] = result.attention_tables
        if stored:
            calibration = dict(result.hardware.calibration or {}) | {"tables": stored}
            result.hardware = result.hardware.model_copy(update={"calibration": calibration})
    return result
