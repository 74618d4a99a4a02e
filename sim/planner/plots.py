"""The plan's figures (PNG, written atomically): latency vs rate per candidate, and cost per candidate."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

from pathlib import Path

from sim.output import write_png


def write_plots(plan: dict, out_dir: Path) -> list[Path]:
    """latency_vs_rate.png and cost.png in out_dir; returns their paths."""
    paths = [Path(out_dir) / "latency_vs_rate.png", Path(out_dir) / "cost.png"]
    for path, figure in zip(paths, (latency_figure(plan), cost_figure(plan)), strict=True):
        write_png(path, figure)
    return paths


def latency_figure(plan: dict) -> Figure:
    """One panel per SLO: the measured percentile at every searched rate, one line per feasible
    candidate, and the limit as a dashed line."""
    limits = plan["slo"]["limits_s"]
    fig = _figure(figsize=(6 * len(limits), 4.5), layout="constrained")
    axes = fig.subplots(1, len(limits), squeeze=False)[0]
    for ax, (key, limit_s) in zip(axes, limits.items(), strict=True):
        for row in plan["candidates"]:
            points = [p for p in row["search_points"] if p["values_s"].get(key) is not None]
            rates = [p["rate_qps"] for p in points]
            ax.plot(rates, [p["values_s"][key] for p in points], marker="o", markersize=3,
                    label=f"{row['hardware']} tp{row['tp']} {row['policy']}")
        ax.axhline(limit_s, color="black", linestyle="--", linewidth=1, label=f"limit {limit_s:g} s")
        ax.set(xscale="log", yscale="log", xlabel="arrival rate per replica (req/s)", ylabel=f"{key} (s)",
               title=f"{key} vs rate ({plan['model']})")
        ax.grid(True, which="both", alpha=0.3)
    axes[-1].legend(fontsize=7, loc="best")
    return fig


def cost_figure(plan: dict) -> Figure:
    """$/hour of every feasible candidate at the target rate, cheapest at the top; the
    recommended one highlighted."""
    rows = plan["candidates"]
    fig = _figure(figsize=(8, 0.35 * len(rows) + 1.5), layout="constrained")
    ax = fig.subplots()
    labels = [f"{r['hardware']} tp{r['tp']} {r['policy']} ({r['gpus']} GPUs)" for r in rows]
    colors = ["tab:green" if i == 0 else "tab:gray" for i in range(len(rows))]
    ax.barh(labels[::-1], [r["cost_per_hour_usd"] for r in rows][::-1], color=colors[::-1])
    ax.set(xlabel="$ per hour", title=f"cost at {plan['target_qps']:g} req/s (green: recommended)")
    ax.tick_params(axis="y", labelsize=7)
    return fig


def _figure(**kwargs) -> Figure:
    """A matplotlib Figure (no pyplot: no global state, no display backend), imported on first use
    so the CLI starts without loading matplotlib."""
    from matplotlib.figure import Figure

    return Figure(**kwargs)
