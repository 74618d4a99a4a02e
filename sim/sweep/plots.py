"""Standard sweep figures (PNG; matplotlib `Figure` objects drawn by Agg, no pyplot state): a
metric-vs-parameter panel per grid key and, for grids of two or more keys, a heatmap per metric
over the first two.

With more keys than a figure shows, the other keys are averaged (lines also shade min..max), and
the figure says so."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

from pathlib import Path

import numpy as np
import pandas as pd

from sim.output import write_png

PLOT_METRICS = {
    "request_throughput": "throughput (req/s)",
    "goodput_request_throughput": "goodput (req/s within the SLOs)",
    "output_throughput_tok_s": "output throughput (tok/s)",
    "ttft_s_p99": "P99 TTFT (ms)",
    "tpot_s_p99": "P99 TPOT (ms)",
    "e2e_s_p99": "P99 end-to-end (ms)",
    "kv_utilization_mean": "mean KV utilisation (share)",
}
MS_METRICS = ("ttft_s_p99", "tpot_s_p99", "e2e_s_p99")  # stored in seconds, drawn in ms
HEATMAP_METRICS = ("request_throughput", "goodput_request_throughput", "ttft_s_p99", "tpot_s_p99",
                   "kv_utilization_mean")


def plot_sweep(frame: pd.DataFrame, grid: dict[str, list], out_dir: Path, slo=None) -> list[Path]:
    """Write the figures for this grid's rows into `out_dir`; return their paths. With `slo` (a
    sim.inputs.slo.PlanSLO), latency panels draw each P99 limit as a dashed line."""
    varying = [k for k, values in grid.items() if len(values) > 1]
    metrics = [m for m in PLOT_METRICS if m in frame.columns and _numeric(frame, m).notna().any()]
    if frame.empty or not varying or not metrics:
        return []
    limits_ms = {} if slo is None else {f"{s.column}_p{s.percentile}": s.limit_s * 1e3 for s in slo.limits}
    paths = [_line_panel(frame, key, grid[key], metrics, varying, out_dir, limits_ms) for key in varying]
    if len(varying) >= 2:
        x_key, y_key = varying[:2]
        for metric in (m for m in HEATMAP_METRICS if m in metrics):
            paths.append(_heatmap(frame, x_key, grid[x_key], y_key, grid[y_key], metric, varying, out_dir))
    return paths


def _numeric(frame: pd.DataFrame, metric: str) -> pd.Series:
    values = pd.to_numeric(frame[metric], errors="coerce")
    return values * 1e3 if metric in MS_METRICS else values


def _where(frame: pd.DataFrame, key: str, value) -> pd.Series:
    """Rows whose `key` column equals a grid value (None matches missing)."""
    return frame[key].isna() if value is None else frame[key] == value


def _line_panel(frame, key, values, metrics, varying, out_dir: Path, limits_ms: dict) -> Path:
    n_cols = 3
    n_rows = -(-len(metrics) // n_cols)
    fig = _figure(figsize=(4.2 * n_cols, 3.2 * n_rows))
    axes = fig.subplots(n_rows, n_cols, squeeze=False)
    labels = [str(v) for v in values]
    positions = np.arange(len(values))
    numeric_x = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    x = np.array(values, dtype=float) if numeric_x else positions
    for ax, metric in zip(axes.flat, metrics, strict=False):
        stats = [_numeric(frame[_where(frame, key, v)], metric) for v in values]
        mean = np.array([s.mean() for s in stats])
        ax.plot(x, mean, marker="o")
        if len(varying) > 1:
            ax.fill_between(x, [s.min() for s in stats], [s.max() for s in stats], alpha=0.2)
        if numeric_x and len(values) > 2 and min(values) > 0 and max(values) / min(values) >= 8:
            ax.set_xscale("log", base=2)
        if metric in limits_ms:
            ax.axhline(limits_ms[metric], color="crimson", linestyle="--", linewidth=1,
                       label=f"SLO {limits_ms[metric]:g} ms")
            ax.legend(fontsize=7)
        ax.set_xticks(x, labels)
        ax.set_xlabel(key)
        ax.set_ylabel(PLOT_METRICS[metric], fontsize=8)
        ax.set_title(PLOT_METRICS[metric], fontsize=10)
        ax.set_ylim(bottom=0)  # from zero: small differences are not magnified
        ax.ticklabel_format(axis="y", useOffset=False, style="plain")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(metrics):]:
        ax.axis("off")
    others = [k for k in varying if k != key]
    note = f" (mean over {', '.join(others)}; band = min..max)" if others else ""
    fig.suptitle(f"metrics vs {key}{note}", fontsize=11)
    fig.tight_layout()
    return _save(fig, out_dir / f"sweep_{key}.png")


def _heatmap(frame, x_key, x_values, y_key, y_values, metric, varying, out_dir: Path) -> Path:
    grid = np.full((len(y_values), len(x_values)), np.nan)
    for i, y in enumerate(y_values):
        for j, x in enumerate(x_values):
            cell = _numeric(frame[_where(frame, x_key, x) & _where(frame, y_key, y)], metric)
            grid[i, j] = cell.mean() if cell.notna().any() else np.nan
    fig = _figure(figsize=(1.1 * len(x_values) + 3, 0.8 * len(y_values) + 2))
    ax = fig.subplots()
    finite = grid[np.isfinite(grid)]
    top = float(finite.max()) if finite.size else 1.0
    image = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis", vmin=0.0, vmax=top or 1.0)  # from zero
    fig.colorbar(image, ax=ax, label=PLOT_METRICS[metric])
    ax.set_xticks(range(len(x_values)), [str(v) for v in x_values])
    ax.set_yticks(range(len(y_values)), [str(v) for v in y_values])
    ax.set_xlabel(x_key)
    ax.set_ylabel(y_key)
    middle = top / 2
    for (i, j), value in np.ndenumerate(grid):
        if np.isfinite(value):
            ax.text(j, i, f"{value:.3g}", ha="center", va="center", fontsize=8,
                    color="black" if value > middle else "white")
    others = [k for k in varying if k not in (x_key, y_key)]
    ax.set_title(PLOT_METRICS[metric] + (f" (mean over {', '.join(others)})" if others else ""), fontsize=10)
    fig.tight_layout()
    return _save(fig, out_dir / f"heatmap_{metric}.png")


def _save(fig, path: Path) -> Path:
    return write_png(path, fig)


def _figure(**kwargs) -> Figure:
    """A matplotlib Figure (no pyplot: no global state, no display backend), imported on first use
    so the CLI starts without loading matplotlib."""
    from matplotlib.figure import Figure

    return Figure(**kwargs)
