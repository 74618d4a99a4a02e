"""The least-squares machinery the fits share: terms in (log) space, applying values to a profile,
solving one class's relative residuals (soft-L1, see calibrate/fit.py)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from calibrate.predict import predict_times_s
from sim.inputs.hardware import HardwareProfile

MIN_EFFICIENCY = 1e-6
LOSS, F_SCALE = "soft_l1", 0.05


def with_terms(hw: HardwareProfile, terms: dict) -> HardwareProfile:
    """`hw` with efficiency terms (and `gpu_link_latency_us`) replaced; validated."""
    terms = dict(terms)
    interconnect = hw.interconnect
    if "gpu_link_latency_us" in terms:
        interconnect = interconnect.model_copy(update={"gpu_link_latency_us": terms.pop("gpu_link_latency_us")})
    efficiency = hw.efficiency.model_validate(hw.efficiency.model_dump() | terms)
    return hw.model_copy(update={"efficiency": efficiency, "interconnect": interconnect})


@dataclass(frozen=True)
class Term:
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


def rows_mape(rows: pd.DataFrame, hw: HardwareProfile) -> float:
    return float(np.mean(np.abs(_relative_residuals(rows, hw))))


PER_OP = "gemm_compute_max_by_op."
FLOOR = "timing_floor_us."  # calibration.timing_floor_us[op]: a timing's host floor (calibrate/predict.py)
# start values of terms the base profile leaves unset
START_WHEN_UNSET = {"gemm_half_output_elems": 1e5, "eager_gemm_floor_us": 20.0}


def _get(hw: HardwareProfile, key: str) -> float:
    eff = hw.efficiency
    if key == "gpu_link_latency_us":
        return hw.interconnect.gpu_link_latency_us
    if key.startswith("paged_attention_memory."):
        return eff.paged_efficiency(int(key.split(".")[1]))
    if key.startswith(PER_OP):
        return (eff.gemm_compute_max_by_op or {}).get(key[len(PER_OP):], eff.gemm_compute_max)
    if key.startswith(FLOOR):
        return ((hw.calibration or {}).get("timing_floor_us") or {}).get(key[len(FLOOR):], START_WHEN_UNSET[
            "eager_gemm_floor_us"])
    value = getattr(eff, key)
    return START_WHEN_UNSET[key] if value is None else value


def _apply(hw: HardwareProfile, values: dict) -> HardwareProfile:
    paged = {int(k.split(".")[1]): v for k, v in values.items() if k.startswith("paged_attention_memory.")}
    per_op = {k[len(PER_OP):]: v for k, v in values.items() if k.startswith(PER_OP)}
    floors = {k[len(FLOOR):]: v for k, v in values.items() if k.startswith(FLOOR)}
    plain = {k: v for k, v in values.items() if not k.startswith(("paged_attention_memory.", PER_OP, FLOOR))}
    if floors:
        calibration = dict(hw.calibration or {})
        calibration["timing_floor_us"] = dict(calibration.get("timing_floor_us") or {}) | floors
        hw = hw.model_copy(update={"calibration": calibration})
    if paged:
        plain["paged_attention_memory"] = dict(hw.efficiency.paged_attention_memory) | paged
    if per_op:
        plain["gemm_compute_max_by_op"] = dict(hw.efficiency.gemm_compute_max_by_op or {}) | per_op
    return with_terms(hw, plain)


def _scaled_start(rows: pd.DataFrame, hw: HardwareProfile, terms: list[Term]) -> dict:
    """Start values: the base's, with efficiencies divided by the median measured/predicted
    ratio when the base is too fast (a CPU is ~1e-3 of a GPU), so the search starts near."""
    ratio = float(np.median(1.0 / (1.0 + _relative_residuals(rows, hw))))
    start = {t.key: _get(hw, t.key) for t in terms}
    if ratio > 2.0:
        for t in terms:
            if t.log and t.high <= 1.0:
                start[t.key] = max(start[t.key] / ratio, t.low)
    return start


def solve(rows: pd.DataFrame, hw: HardwareProfile, terms: list[Term], fixed: dict | None = None):
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
