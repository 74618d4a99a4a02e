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
Later classes see the earlier fits (attention uses the fitted memory efficiency, blend and
launch). A class without rows keeps the base profile's terms, as do step_overhead_us (no kernel
measures it) and block sizes no row measured; `FitResult.kept` lists them.
Efficiencies are searched in log space within (1e-6, 1], so a fit can never claim more than peak.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from calibrate.fit_collectives import fit_collectives
from calibrate.fit_tables import attention_ratio_entries, gemm_table_entries
from calibrate.measurements import COLLECTIVE_OPS, GEMM_OPS
from calibrate.predict import predict_times_s
from sim.errors import InputError
from sim.inputs.hardware import Collectives, HardwareProfile

MIN_EFFICIENCY = 1e-6
TILE_CANDIDATES = (None, 64, 128)
LOSS, F_SCALE = "soft_l1", 0.05


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


def with_terms(hw: HardwareProfile, terms: dict) -> HardwareProfile:
    """`hw` with efficiency terms (and `gpu_link_latency_us`) replaced; validated."""
    terms = dict(terms)
    interconnect = hw.interconnect
    if "gpu_link_latency_us" in terms:
        interconnect = interconnect.model_copy(update={"gpu_link_latency_us": terms.pop("gpu_link_latency_us")})
    efficiency = hw.efficiency.model_validate(hw.efficiency.model_dump() | terms)
    return hw.model_copy(update={"efficiency": efficiency, "interconnect": interconnect})


@dataclass(frozen=True)
class _Term:
    """A fitted term: its profile key, whether searched in log space, and its bounds."""

    key: str
    log: bool
    low: float
    high: float

    def to_x(self, value: float) -> float:
        value = min(max(value, self.low), self.high)
        return float(np.log(value)) if self.log else float(value)

    def from_x(self, x: float) -> float:
        return float(np.exp(x)) if self.log else float(x)

    def bounds(self) -> tuple[float, float]:
        return (self.to_x(self.low), self.to_x(self.high)) if self.log else (self.low, self.high)


def _relative_residuals(rows: pd.DataFrame, hw: HardwareProfile) -> np.ndarray:
    return predict_times_s(rows, hw) / rows["time_s"].astype("float64").to_numpy() - 1.0


def _mape(rows: pd.DataFrame, hw: HardwareProfile) -> float:
    return float(np.mean(np.abs(_relative_residuals(rows, hw))))


PER_OP = "gemm_compute_max_by_op."
OUTPUT_HALF_START = 1e5  # start of gemm_half_output_elems when the base profile has none


def _get(hw: HardwareProfile, key: str) -> float:
    eff = hw.efficiency
    if key == "gpu_link_latency_us":
        return hw.interconnect.gpu_link_latency_us
    if key.startswith("paged_attention_memory."):
        return eff.paged_efficiency(int(key.split(".")[1]))
    if key.startswith(PER_OP):
        return (eff.gemm_compute_max_by_op or {}).get(key[len(PER_OP):], eff.gemm_compute_max)
    if key == "gemm_half_output_elems" and eff.gemm_half_output_elems is None:
        return OUTPUT_HALF_START
    return getattr(eff, key)


def _apply(hw: HardwareProfile, values: dict) -> HardwareProfile:
    paged = {int(k.split(".")[1]): v for k, v in values.items() if k.startswith("paged_attention_memory.")}
    per_op = {k[len(PER_OP):]: v for k, v in values.items() if k.startswith(PER_OP)}
    plain = {k: v for k, v in values.items() if not k.startswith(("paged_attention_memory.", PER_OP))}
    if paged:
        plain["paged_attention_memory"] = dict(hw.efficiency.paged_attention_memory) | paged
    if per_op:
        plain["gemm_compute_max_by_op"] = dict(hw.efficiency.gemm_compute_max_by_op or {}) | per_op
    return with_terms(hw, plain)


def _scaled_start(rows: pd.DataFrame, hw: HardwareProfile, terms: list[_Term]) -> dict:
    """Start values: the base's, with efficiencies divided by the median measured/predicted
    ratio when the base is too fast (a CPU is ~1e-3 of a GPU), so the search starts near."""
    ratio = float(np.median(1.0 / (1.0 + _relative_residuals(rows, hw))))
    start = {t.key: _get(hw, t.key) for t in terms}
    if ratio > 2.0:
        for t in terms:
            if t.log and t.high <= 1.0:
                start[t.key] = max(start[t.key] / ratio, t.low)
    return start


def _solve(rows: pd.DataFrame, hw: HardwareProfile, terms: list[_Term], fixed: dict | None = None):
    """Least-squares fit of `terms` on `rows`; returns (hardware, cost)."""
    fixed = fixed or {}
    hw = _apply(hw, fixed) if fixed else hw

    def residuals(x: np.ndarray) -> np.ndarray:
        values = {t.key: t.from_x(v) for t, v in zip(terms, x, strict=True)}
        return _relative_residuals(rows, _apply(hw, values))

    start = _scaled_start(rows, hw, terms)
    x0 = np.array([t.to_x(start[t.key]) for t in terms])
    low, high = (np.array(b) for b in zip(*(t.bounds() for t in terms), strict=True))
    x0 = np.clip(x0, low + 1e-9 * (high - low), high - 1e-9 * (high - low))
    result = least_squares(residuals, x0, bounds=(low, high), loss=LOSS, f_scale=F_SCALE, x_scale="jac")
    values = {t.key: t.from_x(v) for t, v in zip(terms, result.x, strict=True)}
    return _apply(hw, values), float(result.cost)


_EFF = dict(log=True, low=MIN_EFFICIENCY, high=1.0)
GEMM_TERMS = [
    _Term("gemm_half_tokens", log=False, low=0.0, high=1e5),
    _Term("gemm_half_output_elems", log=True, low=1.0, high=1e9),
    _Term("memory", **_EFF),
    _Term("roofline_blend", log=False, low=1.0, high=64.0),
    _Term("kernel_launch_us", log=False, low=0.0, high=1e5),
]
GEMM_KEYS = ["gemm_compute_max", "gemm_compute_max_by_op"] + [t.key for t in GEMM_TERMS] + ["gemm_tile_tokens"]


def _fit_gemm(rows: pd.DataFrame, hw: HardwareProfile) -> tuple[HardwareProfile, dict]:
    """GEMM terms: a compute ceiling per op class present in `rows` (gemm_compute_max_by_op),
    the shared ramp / occupancy / memory / blend / launch terms; the tile size is picked by the
    lowest loss over `TILE_CANDIDATES`. gemm_compute_max (for classes without their own ceiling,
    e.g. MoE experts) becomes the mean of the fitted ceilings."""
    ceilings = [_Term(PER_OP + op, **_EFF) for op in GEMM_OPS if (rows["op"] == op).any()]
    fits = [_solve(rows, hw, ceilings + GEMM_TERMS, {"gemm_tile_tokens": tile}) for tile in TILE_CANDIDATES]
    best, _ = min(fits, key=lambda fit: fit[1])
    by_op = best.efficiency.gemm_compute_max_by_op or {}
    if by_op:
        best = with_terms(best, {"gemm_compute_max": float(np.mean(list(by_op.values())))})
    return best, {key: getattr(best.efficiency, key) for key in GEMM_KEYS}


def _fit_prefill(rows: pd.DataFrame, hw: HardwareProfile) -> tuple[HardwareProfile, dict]:
    fitted, _ = _solve(rows, hw, [_Term("attention_compute", **_EFF)])
    return fitted, {"attention_compute": fitted.efficiency.attention_compute}


def _fit_decode(rows: pd.DataFrame, hw: HardwareProfile) -> tuple[HardwareProfile, dict]:
    terms = {}
    for block_size, block_rows in rows.groupby("block_size"):
        key = f"paged_attention_memory.{int(block_size)}"
        hw, _ = _solve(block_rows, hw, [_Term(key, **_EFF)])
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
        if rows.empty:
            result.kept += term_keys
            continue
        result.hardware, terms = fit(rows, result.hardware)
        result.classes.append(ClassFit(name, len(rows), terms, _mape(rows, result.hardware)))
    measured_blocks = set(frame.loc[frame["op"] == "decode_attention", "block_size"].dropna().astype(int))
    unmeasured = sorted(set(base.efficiency.paged_attention_memory) - measured_blocks)
    if measured_blocks and unmeasured:
        result.kept += [f"paged_attention_memory.{b}" for b in unmeasured]
    result.kept.append("step_overhead_us")
    collective_rows = frame[frame["op"].isin(COLLECTIVE_OPS)]
    if not collective_rows.empty:
        result.collective_residuals = fit_collectives(collective_rows.reset_index(drop=True))[1]
    if tables:
        result.tables = gemm_table_entries(frame)
        result.attention_tables = attention_ratio_entries(frame, result.hardware)
        stored = {"gemm": result.tables} if result.tables else {}
        if result.attention_tables:
            stored["attention"] = result.attention_tables
        if stored:
            result.hardware = result.hardware.model_copy(update={"calibration": {"tables": stored}})
    return result
