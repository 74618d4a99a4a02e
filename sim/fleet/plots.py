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
        rows, width_h = (summary["minutes"], 1 / 60) if summary.get("minutes") else (summary["hours"], 1.0)
        start_h = np.array([row["start_s"] / 3600 if "start_s" in row else row["hour"] for row in rows])
        attained = np.array([np.nan if row["slo_attainment"] is None else row["slo_attainment"] for row in rows])
        axes[2].plot(start_h + width_h / 2, attained * 100.0, marker="o" if len(rows) <= 48 else None, label=label)
        alive = np.asarray(timeline["ready"]) + starting + np.asarray(timeline["draining"])
        gpu_h = np.concatenate([[0.0], np.cumsum(alive[:-1] * np.diff(t_h))]) * summary["tp"]
        axes[3].plot(t_h, gpu_h, label=f"{label}: {summary['gpu_hours']:.1f} GPU-h billed, "
                                        f"${summary['dollars_per_day']:,.0f}/day")
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
    per = "minute" if first.get("minutes") else "hour"
    axes[2].set_ylabel(f"SLO attainment % per {per}\n{_slo_text(first['slo'])}")
    axes[3].set_ylabel("GPU-hours so far\n(sampled at decisions)")
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
