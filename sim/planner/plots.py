"""The plan's figures (PNG, written atomically), meant for a report: latency vs rate with the SLO
lines and the chosen operating point, cost per candidate, and the Pareto frontier.

Few labelled series (the recommendation and the best candidate of each other hardware kind), units
on every axis, milliseconds for latencies, no offset tick labels."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

from pathlib import Path

from sim.output import write_png
from sim.planner.pareto_plot import pareto_figure

__all__ = ["cost_figure", "latency_figure", "pareto_figure", "write_plots"]

MAX_SERIES = 4
MAX_COST_ROWS = 12
RECOMMENDED_COLOR = "tab:green"
OTHER_COLORS = ("tab:blue", "tab:orange", "tab:purple", "tab:brown")


def write_plots(plan: dict, out_dir: Path) -> list[Path]:
    """latency_vs_rate.png, cost.png and pareto.png in out_dir; returns their paths."""
    figures = {"latency_vs_rate.png": latency_figure(plan), "cost.png": cost_figure(plan),
               "pareto.png": pareto_figure(plan)}
    return [write_png(Path(out_dir) / name, figure) for name, figure in figures.items()]


def _label(row: dict) -> str:
    knobs = "".join(f" {k}={v}" for k, v in row["knobs"].items())
    return f"{row['hardware']} tp{row['tp']} {row['policy']}{knobs}"


def shown_series(plan: dict) -> list[dict]:
    """The recommendation first, then the cheapest row of each other hardware kind (at most MAX_SERIES)."""
    rows = plan["candidates"]
    first = plan["recommended"] or (rows[0] if rows else None)
    shown, kinds = ([first], {first["hardware"]}) if first else ([], set())
    for row in rows:
        if len(shown) >= MAX_SERIES:
            break
        if row["hardware"] not in kinds:
            shown.append(row)
            kinds.add(row["hardware"])
    return shown


def latency_figure(plan: dict) -> Figure:
    """One panel per SLO: the per-replica percentile (ms) at every searched rate, the SLO limit, the
    recommended operating point (target / replicas) and what the whole-workload run measured there."""
    limits = plan["slo"]["limits_s"]
    fig = _figure(figsize=(5.5 * len(limits), 4.2), layout="constrained")
    axes = fig.subplots(1, len(limits), squeeze=False)[0]
    best = plan["recommended"]
    for ax, (key, limit_s) in zip(axes, limits.items(), strict=True):
        for i, row in enumerate(shown_series(plan)):
            points = [p for p in row["search_points"] if p["values_s"].get(key) is not None]
            is_best = best is not None and _label(row) == _label(best)
            ax.plot([p["rate_qps"] for p in points], [p["values_s"][key] * 1e3 for p in points], marker="o",
                    markersize=3, linewidth=2.2 if is_best else 1.2,
                    color=RECOMMENDED_COLOR if is_best else OTHER_COLORS[i % len(OTHER_COLORS)],
                    label=_label(row) + (" (recommended)" if is_best else ""))
        ax.axhline(limit_s * 1e3, color="crimson", linestyle="--", linewidth=1, label=f"SLO {key} {limit_s * 1e3:g} ms")
        if best is not None:
            _mark_operating_point(ax, plan, best, key)
            ax.set_xlim(left=plan["target_qps"] / best["replicas"] / 16)  # the search floor would squash the rest
        ax.set(xscale="log", yscale="log", xlabel="arrival rate per replica (req/s)", ylabel=f"{_title(key)} (ms)",
               title=f"{_title(key)} vs rate per replica, {plan['model']}")
        _plain_log_ticks(ax)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", framealpha=0.9)
    return fig


def _plain_log_ticks(ax) -> None:
    """Tick labels as plain numbers (3, 10, 300), not 3x10^0."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    plain = FuncFormatter(lambda value, _: f"{value:g}")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(plain)
        axis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))
        axis.set_minor_formatter(plain)
        axis.set_tick_params(which="minor", labelsize=7)


def _mark_operating_point(ax, plan: dict, best: dict, key: str) -> None:
    rate = plan["target_qps"] / best["replicas"]
    ax.axvline(rate, color="gray", linestyle=":", linewidth=1)
    run = best.get("verified_run")
    if run is not None and run["slo"].get(key, {}).get("value_s") is not None:
        ax.plot([rate], [run["slo"][key]["value_s"] * 1e3], marker="*", markersize=13, color="black", linestyle="none",
                label=f"{best['replicas']} replica{'s' * (best['replicas'] != 1)}, whole workload at "
                      f"{plan['target_qps']:g} req/s")


def _title(key: str) -> str:
    metric, percentile = key.split("_p")
    return f"P{percentile} {metric.upper()}"


def cost_figure(plan: dict) -> Figure:
    """$/hour of the cheapest feasible candidates at the target rate; the recommended one green,
    verified ones dark, estimates light."""
    rows = plan["candidates"][:MAX_COST_ROWS]
    fig = _figure(figsize=(8, 0.38 * len(rows) + 1.6), layout="constrained")
    ax = fig.subplots()
    labels = [f"{_label(r)} ({r['gpus']} GPUs{', verified' if r.get('verified') else ''})" for r in rows]
    best = plan["recommended"]
    colors = [RECOMMENDED_COLOR if best is not None and _label(r) == _label(best) else
              ("tab:gray" if r.get("verified") else "lightgray") for r in rows]
    ax.barh(labels[::-1], [r["cost_per_hour_usd"] for r in rows][::-1], color=colors[::-1])
    ax.set(xlabel="cost ($ per hour)",
           title=f"cluster cost at {plan['target_qps']:g} req/s\n(green: recommended; dark: verified; light: estimate)")
    ax.tick_params(axis="y", labelsize=7)
    ax.ticklabel_format(axis="x", useOffset=False, style="plain")
    return fig


def _figure(**kwargs) -> Figure:
    """A matplotlib Figure (no pyplot: no global state, no display backend), imported on first use
    so the CLI starts without loading matplotlib."""
    from matplotlib.figure import Figure

    return Figure(**kwargs)
