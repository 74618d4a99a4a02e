"""GEMM and all-reduce times before (the profile's smooth model and collective fits) and after (the
imported AIConfigurator tables), scored on held-out points of the AIConfigurator tables themselves.

    PYTHONPATH=. python bench/bench_aic_tables.py [--profiles h200,b200]

Two leave-outs per profile and dtype; the "after" grid is built from the kept points only:
- `shapes`: keep every other N and every other K of the grid (even indices), score every (N, K)
  column with an odd N or K index that lies inside the kept range, at every M: whole shapes the
  lookup never saw, interpolated in (log N, log K).
- `M`: keep every other M (even indices, all N and K), score the odd-indexed M inside the kept range.
"Before" is the profile's smooth GEMM model (its efficiencies and datasheet peaks, no op class); it
never saw these points either. All-reduce: per kind (nccl, custom) and group size, every other measured
message size kept, the sizes between them scored; "before" is the profile's `collectives` fit of that
kind and size (else the ring formula). Errors: |predicted - measured| / measured, in %.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_spec_decode import table  # the same plain table (this folder is on sys.path)  # noqa: E402

from sim.cost.arch import gemm_dtype
from sim.cost.collective_tables import MeasuredLink, allreduce_tables
from sim.cost.collectives import link_time_s
from sim.cost.gemm_grid import GemmGrid, gemm_grid
from sim.cost.roofline import allreduce_time_s, gemm_time_s
from sim.inputs.hardware import load_hardware

ACT_BYTES = 2.0  # bf16 activations, the CostModel default


def smooth_for(hw, dtype: str):
    g = gemm_dtype(hw, dtype)

    def smooth_nk(m, n, k):
        return gemm_time_s(m, n, k, g.bytes_el, ACT_BYTES, g.peak_flops, hw.hbm_bandwidth_bytes_s, g.eff)[0]

    return smooth_nk


def subgrid(grid: GemmGrid, m_idx, n_idx, k_idx) -> GemmGrid:
    logs = {d: t[np.ix_(m_idx, n_idx, k_idx)] for d, t in grid.log_time_s.items()}
    return GemmGrid(grid.path, grid.m_tokens[m_idx], grid.n_out[n_idx], grid.k_in[k_idx], logs, grid.meta)


def score(grid: GemmGrid, kept: GemmGrid, dtype: str, smooth_nk, m_idx, cols) -> tuple[np.ndarray, np.ndarray]:
    """(smooth errors, table errors) in % over held-out points: M indices `m_idx` of columns `cols`."""
    truth_log = grid.log_time_s[dtype]
    before, after = [], []
    m = grid.m_tokens[m_idx]
    for j, i_k in cols:
        truth = np.exp(truth_log[m_idx, j, i_k])
        ok = np.isfinite(truth)
        n, k = int(grid.n_out[j]), int(grid.k_in[i_k])
        table = kept.curve(dtype, n, k, smooth_nk)
        if table is None or not ok.any():
            continue
        smooth = smooth_nk(m[ok], n, k)
        pred = table.time_at_s(m[ok], lambda mm, n=n, k=k: smooth_nk(mm, n, k))
        before.append(np.abs(smooth / truth[ok] - 1) * 100)
        after.append(np.abs(pred / truth[ok] - 1) * 100)
    return np.concatenate(before), np.concatenate(after)


def leave_outs(grid: GemmGrid, dtype: str, smooth_nk):
    nm, nn, nk = (a.size for a in (grid.m_tokens, grid.n_out, grid.k_in))
    even_n, even_k = np.arange(0, nn, 2), np.arange(0, nk, 2)
    kept = subgrid(grid, np.arange(nm), even_n, even_k)
    cols = [(j, i) for j in range(even_n[-1] + 1) for i in range(even_k[-1] + 1) if j % 2 or i % 2]
    yield "shapes", score(grid, kept, dtype, smooth_nk, np.arange(nm), cols)
    even_m = np.arange(0, nm, 2)
    kept = subgrid(grid, even_m, np.arange(nn), np.arange(nk))
    odd_m = np.arange(1, even_m[-1], 2)
    yield "M", score(grid, kept, dtype, smooth_nk, odd_m, [(j, i) for j in range(nn) for i in range(nk)])


def stats(err: np.ndarray) -> list[str]:
    return [f"{err.mean():.1f}", f"{np.median(err):.1f}", f"{np.percentile(err, 90):.1f}"]


def fitted_allreduce_s(hw, kind: str, tp: int, payload: np.ndarray) -> np.ndarray:
    """The profile's all-reduce before the tables: its `collectives` fit, else the ring formula."""
    fits = (hw.collectives.allreduce.get(kind) or hw.collectives.allreduce.get("nccl")) if hw.collectives else None
    if not fits:
        latency = hw.interconnect.gpu_link_latency_us * 1e-6
        return allreduce_time_s(payload, tp, hw.gpu_link_bytes_s, latency, hw.efficiency)
    return link_time_s(payload, fits[min((s for s in fits if s >= tp), default=max(fits))])


def allreduce_rows(name: str, hw) -> list[list[str]]:
    rows = []
    for (kind, tp), link in sorted(allreduce_tables(hw.calibration, hw.name).items()):
        kept = MeasuredLink(kind, tp, link.payload_bytes[::2], link.time_s[::2])
        odd = np.arange(1, link.payload_bytes.size - 1, 2)
        payload, truth = link.payload_bytes[odd], link.time_s[odd]
        before = np.abs(fitted_allreduce_s(hw, kind, tp, payload) / truth - 1) * 100
        after = np.abs(kept.time_at_s(payload) / truth - 1) * 100
        rows.append([name, kind, str(tp), str(odd.size), f"{payload[0]:.0f}-{payload[-1]:.3g}", *stats(before),
                     *stats(after)])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", default="h200,b200")
    args = parser.parse_args()
    rows = []
    for name in args.profiles.split(","):
        hw = load_hardware(name)
        grid = gemm_grid(hw.calibration, hw.name)
        if grid is None:
            print(f"{name}: no measured GEMM grid in its profile")
            continue
        for dtype in grid.log_time_s:
            try:
                smooth_nk = smooth_for(hw, dtype)
            except Exception as exc:  # noqa: BLE001 - a dtype this profile has no peak for: say so, go on
                print(f"{name} {dtype}: no smooth model ({exc})")
                continue
            for scheme, (before, after) in leave_outs(grid, dtype, smooth_nk):
                rows.append([name, dtype, scheme, str(before.size), *stats(before), *stats(after)])
    header = ["profile", "dtype", "held out", "points", "smooth MAPE", "smooth med", "smooth p90",
              "table MAPE", "table med", "table p90"]
    table("GEMM time vs held-out AIConfigurator grid points (errors in %)", header, rows)
    rows = [row for name in args.profiles.split(",") for row in allreduce_rows(name, load_hardware(name))]
    table("All-reduce time vs held-out AIConfigurator message sizes (errors in %)",
          ["profile", "kind", "TP", "sizes", "bytes", "fit MAPE", "fit med", "fit p90", "table MAPE", "table med",
           "table p90"], rows)


if __name__ == "__main__":
    main()
