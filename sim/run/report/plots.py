"""Small matplotlib helpers shared by the notebooks. Each draws on an `ax` it is given."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sim.run.report.latency import PARTS, empirical_cdf

LINE_STYLES = ("-", "--", "-.", ":")
PART_LABELS = {"queueing_s": "queueing", "prefill_s": "prefill", "decode_s": "decode", "preemption_s": "preemption"}


def plot_cdfs(ax, values_by_label: dict[str, np.ndarray], xlabel: str, log_x: bool = False) -> None:
    """One empirical CDF line per label (line styles cycle so identical curves stay visible)."""
    for i, (label, values) in enumerate(values_by_label.items()):
        x, y = empirical_cdf(values)
        if x.size:
            ax.step(x, y, where="post", label=label, linestyle=LINE_STYLES[i % len(LINE_STYLES)])
    if log_x:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of requests")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")


def plot_stacked_parts(ax, table: pd.DataFrame, title: str) -> None:
    """Stacked bars of the latency parts, one bar per row of `table` (a breakdown_table slice)."""
    labels = [str(label) for label in table.index]
    bottom = np.zeros(len(table))
    for part in PARTS:
        heights = table[part].to_numpy(dtype=np.float64)
        ax.bar(labels, heights, bottom=bottom, label=PART_LABELS[part])
        bottom += heights
    ax.set_title(title)
    ax.set_ylabel("seconds per request")
    ax.tick_params(axis="x", labelrotation=20)
    ax.legend(fontsize="small")


def plot_metric_vs(ax, x, ys: dict[str, np.ndarray], xlabel: str, ylabel: str, log_x: bool = False) -> None:
    """Lines with markers of one or more metrics against one parameter."""
    for label, y in ys.items():
        ax.plot(x, y, marker="o", label=label)
    if log_x:
        ax.set_xscale("log", base=2)
        ax.set_xticks(list(x), [str(v) for v in x])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if len(ys) > 1:
        ax.legend(fontsize="small")
