"""Day figures (PNG, matplotlib Figure drawn by Agg, no pyplot state): for one or more runs of the
same day, over the hours: offered rate and replicas ready, queue length, SLO attainment per hour,
GPU-hours so far and $ per hour."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sim.output import write_png


def plot_days(runs: dict[str, tuple[dict, dict]], path: Path, rate: tuple | None = None,
              title: str = "") -> Path:
    """`runs`: label -> (summary, timeline). `rate`: (t_s array, rps array) of the offered rate."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(11, 10))
    axes = figure.subplots(4, 1, sharex=True)
    for label, (summary, timeline) in runs.items():
        t_h = np.asarray(timeline["t_s"]) / 3600.0
        axes[0].step(t_h, timeline["ready"], where="post", label=f"{label}: ready")
        starting = np.asarray(timeline["starting"])
        if starting.any():
            axes[0].fill_between(t_h, timeline["ready"], np.asarray(timeline["ready"]) + starting, step="post",
                                 alpha=0.25)
        axes[1].step(t_h, timeline["queue_length"], where="post", label=label)
        hours = summary["hours"]
        mid_h = np.array([row["hour"] + 0.5 for row in hours])
        attained = np.array([np.nan if row["slo_attainment"] is None else row["slo_attainment"] for row in hours])
        axes[2].plot(mid_h, attained * 100.0, marker="o", label=label)
        gpu_h = np.cumsum([row["gpu_hours"] for row in hours])
        axes[3].plot(np.arange(1, len(hours) + 1), gpu_h, marker=".",
                     label=f"{label}: {summary['gpu_hours']:.0f} GPU-h, ${summary['dollars_per_day']:,.0f}/day")
    if rate is not None:
        twin = axes[0].twinx()
        twin.plot(np.asarray(rate[0]) / 3600.0, rate[1], color="grey", linestyle=":", label="offered rate")
        twin.set_ylabel("offered req/s")
        twin.legend(loc="upper right", fontsize=8)
    first = next(iter(runs.values()))[0]
    axes[2].axhline(first["attainment_target"] * 100.0, color="red", linestyle="--", linewidth=1,
                    label=f"target {first['attainment_target'] * 100:g} %")
    axes[0].set_ylabel("replicas ready\n(shaded: starting)")
    axes[1].set_ylabel("queue (requests)")
    axes[2].set_ylabel(f"SLO attainment %\n{_slo_text(first['slo'])}")
    axes[3].set_ylabel("GPU-hours so far")
    axes[3].set_xlabel("hour of the day")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    return write_png(path, figure)


def _slo_text(slo: dict) -> str:
    return ", ".join(f"{key.removesuffix('_s')} <= {value:g} s" for key, value in slo.items())
