"""Measured GEMM grids: a profile's `calibration.tables.gemm_grid`, kernel times measured on a
regular M x N x K grid per weight dtype (imported from AIConfigurator's silicon tables by
`infersim calibrate import-tables`, calibrate/import_aic.py).

Unlike `calibration.tables.gemm` (one table per exact model shape, sim/cost/tables.py), a grid
answers any shape. A lookup for (N, K) builds the M curve of that shape once:
- N and K inside the grid: bilinear interpolation in (log N, log K) of log time between the four
  measured neighbouring columns (GEMM time is close to a power law in each of them);
- N or K outside: the curve at the nearest grid edge (N, K clamped), scaled per M by the smooth
  model's ratio smooth(M, N, K) / smooth(M, N_edge, K_edge), never a linear extrapolation.
The curve is a `GemmTable`, so M inside the measured range is interpolated log-log and M outside
it is scaled by the smooth model at the edge, as for an exact-shape table. Grid points the source
did not measure (NaN in the file) drop out of the curves they would enter.

YAML (the file relative to the profile YAML that names it, else to the bundled hwprofiles folder, or absolute):

    calibration:
      tables:
        gemm_grid: {file: tables/h200/aic-vllm-0.24.0-gemm.npz}

The .npz holds `m_tokens`, `n_out`, `k_in` (strictly increasing), `time_us_<dtype>` (float32,
[M, N, K], NaN where not measured) per dtype, and `meta` (a JSON string: source, licence, commit).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from sim.cost.tables import GemmTable
from sim.errors import InputError

# the dtype a grid holds for each weight dtype a run may name (fp16 GEMMs run at the bf16 peak)
GRID_DTYPE_OF = {"bf16": "bf16", "fp16": "bf16", "fp8": "fp8", "nvfp4": "nvfp4"}
SmoothNK = Callable[[np.ndarray, int, int], np.ndarray]  # seconds at M for an (N, K) shape


@dataclass(frozen=True)
class GemmGrid:
    """One file's grids: axes shared by every dtype, log times per dtype."""

    path: str
    m_tokens: np.ndarray
    n_out: np.ndarray
    k_in: np.ndarray
    log_time_s: dict[str, np.ndarray]  # dtype -> [M, N, K] natural log of seconds (NaN: not measured)
    meta: dict = field(default_factory=dict)

    def has(self, weight_dtype: str) -> bool:
        return GRID_DTYPE_OF.get(weight_dtype) in self.log_time_s

    def inside_nk(self, n_out: int, k_in: int) -> bool:
        return bool(self.n_out[0] <= n_out <= self.n_out[-1] and self.k_in[0] <= k_in <= self.k_in[-1])

    def curve(self, weight_dtype: str, n_out: int, k_in: int, smooth_nk: SmoothNK, op: str = "gemm",
              tp: int = 1, bytes_per_el: int = 0) -> GemmTable | None:
        """The M curve of shape (N, K) as a table; None when the grid has no such dtype or fewer than
        two measured M points survive for this shape."""
        log_t = self.log_time_s.get(GRID_DTYPE_OF.get(weight_dtype, ""))
        if log_t is None:
            return None
        n_edge = float(np.clip(n_out, self.n_out[0], self.n_out[-1]))
        k_edge = float(np.clip(k_in, self.k_in[0], self.k_in[-1]))
        (n0, n1), wn = _bracket(self.n_out, n_edge)
        (k0, k1), wk = _bracket(self.k_in, k_edge)
        log_curve = ((1 - wn) * (1 - wk) * log_t[:, n0, k0] + wn * (1 - wk) * log_t[:, n1, k0]
                     + (1 - wn) * wk * log_t[:, n0, k1] + wn * wk * log_t[:, n1, k1])  # fmt: skip
        kept = np.isfinite(log_curve)
        if kept.sum() < 2:
            return None
        m = self.m_tokens[kept].astype(np.float64)
        # kept as measured, not as a running maximum over M: the grids' departures from monotone are
        # mostly single slow outliers (H100 16384 x 8192 bf16: 105.7 us at M = 8, 89.7 at M = 10), and a
        # running maximum carries each outlier to every larger M of the memory-bound range (Llama-2-70B
        # TP 4 gate_up +14 % at M = 32); the rest are real kernel changes at tile edges that the library
        # the engine calls makes alike (docs/cost-model.md)
        time_s = np.exp(log_curve[kept])
        if (n_edge, k_edge) != (n_out, k_in):  # outside in N or K: the smooth model's ratio from the edge
            time_s = time_s * smooth_nk(m, n_out, k_in) / smooth_nk(m, n_edge, k_edge)
        return GemmTable(op, tp, int(n_out), int(k_in), bytes_per_el, m, time_s)


def _bracket(axis: np.ndarray, value: float) -> tuple[tuple[int, int], float]:
    """Neighbouring indices of `value` on a strictly increasing `axis` and its weight in log space."""
    hi = int(np.clip(np.searchsorted(axis, value), 1, len(axis) - 1))
    lo = hi - 1
    weight = (np.log(value) - np.log(axis[lo])) / (np.log(axis[hi]) - np.log(axis[lo]))
    return (lo, hi), float(np.clip(weight, 0.0, 1.0))


def _axis(data, name: str, where: str) -> np.ndarray:
    values = np.asarray(data[name], dtype=np.float64) if name in data else np.zeros(0)
    if (values.ndim != 1 or values.size < 2 or not np.all(np.isfinite(values)) or np.any(values < 1)
            or np.any(np.diff(values) <= 0)):
        raise InputError(where, name, "at least 2 strictly increasing sizes >= 1")
    return values


@lru_cache(maxsize=32)
def load_gemm_grid(path: str) -> GemmGrid:
    """The grid file at `path` (cached: profiles are loaded once, cost models built often)."""
    if not Path(path).is_file():
        raise InputError(path, None, "GEMM grid file not found (calibration.tables.gemm_grid.file)")
    try:
        data = dict(np.load(path, allow_pickle=False))
    except (OSError, ValueError) as exc:
        raise InputError(path, None, f"a .npz GEMM grid written by `calibrate import-tables` ({exc})") from None
    axes = [_axis(data, name, path) for name in ("m_tokens", "n_out", "k_in")]
    shape = tuple(a.size for a in axes)
    grids = {}
    for key, values in data.items():
        if not key.startswith("time_us_"):
            continue
        times = np.asarray(values, dtype=np.float64) if values.dtype.kind in "fiu" else np.zeros(0)
        if times.shape != shape or np.any(times[np.isfinite(times)] <= 0):
            raise InputError(path, key, f"times > 0 (or NaN) of shape {shape}")
        with np.errstate(invalid="ignore", divide="ignore"):
            grids[key.removeprefix("time_us_")] = np.log(times * 1e-6)
    if not grids:
        raise InputError(path, None, "at least one time_us_<dtype> grid")
    try:
        meta = json.loads(str(data["meta"])) if "meta" in data else {}
    except ValueError:
        raise InputError(path, "meta", "a JSON object (source, licence, commit)") from None
    return GemmGrid(path, *axes, grids, meta)


def gemm_grid(calibration: dict | None, where: str) -> GemmGrid | None:
    """The grid a profile names in `calibration.tables.gemm_grid`; None when it names none."""
    tables = (calibration or {}).get("tables") or {}
    entry = tables.get("gemm_grid") if isinstance(tables, dict) else None
    if entry is None:
        return None
    if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
        raise InputError(where, "calibration.tables.gemm_grid", "a mapping with `file`: the path of a .npz grid")
    return load_gemm_grid(entry["file"])



def held_at_roofline_s(time_s, flops, bytes_, peak_flops: float, bandwidth_bytes_s: float):
    """A measured GEMM time held at the datasheet roofline (flops / peak, bytes / HBM bandwidth). A table
    that re-runs one GEMM keeps a weight smaller than the L2 (L40S 96 MB, RTX PRO 6000 128 MB) resident
    and times it faster than HBM can stream it (AIConfigurator's L40S 4096x2048 bf16 at M = 1: 19.40 us,
    where 864 GB/s needs 19.43 us); in a model step each layer's weights come from HBM. No rows (no flops),
    no GEMM: 0, where the grid would answer with its smallest M."""
    held = np.maximum(time_s, np.maximum(flops / peak_flops, bytes_ / bandwidth_bytes_s))
    return np.where(np.asarray(flops) > 0, held, 0.0)


def measured_table(cost, n_out: int, k_in: int, weight_dtype: str, bytes_per_el: float, smooth_nk: SmoothNK,
                   op: str | None = None) -> GemmTable | None:
    """The measured answer for one GEMM shape of `cost` (a CostModel): its exact-shape table
    (`calibration.tables.gemm`) first, else the M curve of the profile's grid (cached per shape),
    else None (the smooth model answers)."""
    table = cost.tables.get((int(n_out), int(k_in), int(bytes_per_el)))
    if table is not None or cost.gemm_grid is None:
        return table
    key = (weight_dtype, int(n_out), int(k_in), op)
    if key not in cost.grid_curves:
        cost.grid_curves[key] = cost.gemm_grid.curve(weight_dtype, int(n_out), int(k_in), smooth_nk, op or "gemm",
                                                     cost.tp, int(bytes_per_el))
    return cost.grid_curves[key]
