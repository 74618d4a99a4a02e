"""Measured GEMM tables: a calibrated profile's `calibration.tables.gemm`, used where a simulated
GEMM's shape was measured.

A table holds one shape (N, K on one TP shard, bytes per weight element) and its measured time
at each measured M. Inside the measured M range the time is interpolated in log-log space,
piecewise linearly between neighbouring measured points (exact at them, monotone between them).
Outside it the smooth roofline answers, scaled to meet the table at its edge:
t(M) = t_table(M_edge) * t_smooth(M) / t_smooth(M_edge), never a linear extrapolation.

YAML (one entry per shape; times in microseconds):

    calibration:
      tables:
        gemm:
          - {op: qkv_proj, tp: 1, n_out: 12288, k_in: 4096, bytes_per_el: 2,
             m_tokens: [1, 2, 4, ...], time_us: [12.1, 12.3, ...]}
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from sim.errors import InputError

TableKey = tuple[int, int, int]  # (n_out, k_in, bytes per weight element)


@dataclass(frozen=True)
class GemmTable:
    op: str
    tp: int
    n_out: int
    k_in: int
    bytes_per_el: int
    m_tokens: np.ndarray  # strictly increasing, >= 1
    time_s: np.ndarray  # > 0, same length

    @property
    def key(self) -> TableKey:
        return (self.n_out, self.k_in, self.bytes_per_el)

    @property
    def m_min(self) -> float:
        return float(self.m_tokens[0])

    @property
    def m_max(self) -> float:
        return float(self.m_tokens[-1])

    def time_at_s(self, m_tokens: np.ndarray, smooth_s: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """Seconds at each M (0 where M <= 0); `smooth_s(M)` is the smooth model for this shape."""
        m = np.asarray(m_tokens, dtype=np.float64)
        log_m, log_t = np.log(self.m_tokens), np.log(self.time_s)
        inside = np.exp(np.interp(np.log(np.clip(m, self.m_min, self.m_max)), log_m, log_t))
        out = inside
        below, above = (m < self.m_min) & (m > 0), m > self.m_max
        if below.any() or above.any():
            edges = np.array([self.m_min, self.m_max])
            smooth_edges = smooth_s(edges)
            smooth_m = smooth_s(np.where(m > 0, m, 1.0))
            out = np.where(below, self.time_s[0] * smooth_m / smooth_edges[0], out)
            out = np.where(above, self.time_s[-1] * smooth_m / smooth_edges[1], out)
        return np.where(m > 0, out, 0.0)


def _fail(where: str, field: str, allowed: str):
    raise InputError(where, field, allowed)


def _table(entry: object, where: str, index: int) -> GemmTable:
    field = f"calibration.tables.gemm[{index}]"
    if not isinstance(entry, dict):
        _fail(where, field, "a mapping with op, tp, n_out, k_in, bytes_per_el, m_tokens, time_us")
    for name in ("n_out", "k_in", "bytes_per_el", "tp"):
        value = entry.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            _fail(where, f"{field}.{name}", "a whole number >= 1")
    m = np.asarray(entry.get("m_tokens") or [], dtype=np.float64)
    t = np.asarray(entry.get("time_us") or [], dtype=np.float64)
    if m.ndim != 1 or m.size < 2 or np.any(m < 1) or np.any(np.diff(m) <= 0):
        _fail(where, f"{field}.m_tokens", "at least 2 strictly increasing token counts >= 1")
    if t.shape != m.shape or not np.all(np.isfinite(t)) or np.any(t <= 0):
        _fail(where, f"{field}.time_us", "one finite time > 0 per m_tokens entry")
    return GemmTable(str(entry.get("op", "gemm")), entry["tp"], entry["n_out"], entry["k_in"],
                     entry["bytes_per_el"], m, t * 1e-6)  # fmt: skip


def gemm_tables(calibration: dict | None, where: str) -> dict[TableKey, GemmTable]:
    """The GEMM tables of a profile's `calibration` section, by shape; {} when there are none.
    A malformed table raises InputError naming the profile and the field."""
    tables = (calibration or {}).get("tables") or {}
    if not isinstance(tables, dict):
        _fail(where, "calibration.tables", "a mapping with a `gemm` list")
    entries = tables.get("gemm") or []
    if not isinstance(entries, list):
        _fail(where, "calibration.tables.gemm", "a list of tables")
    out: dict[TableKey, GemmTable] = {}
    for index, entry in enumerate(entries):
        table = _table(entry, where, index)
        if table.key in out:
            _fail(where, f"calibration.tables.gemm[{index}]", "one table per (n_out, k_in, bytes_per_el)")
        out[table.key] = table
    return out


def table_entry(op: str, tp: int, n_out: int, k_in: int, bytes_per_el: int, m_tokens, time_s) -> dict:
    """A table as written to YAML (times in microseconds, 4 significant digits)."""
    return {
        "op": op, "tp": int(tp), "n_out": int(n_out), "k_in": int(k_in), "bytes_per_el": int(bytes_per_el),
        "m_tokens": [int(m) for m in m_tokens], "time_us": [float(f"{t * 1e6:.4g}") for t in time_s],
    }  # fmt: skip
