"""pareto.png: throughput against interactivity, per GPU, per dollar and per joule, for a report.

The panels share the x axis, per-user speed (output tok/s per user = 1 / mean TPOT): output tok/s
per GPU, output tokens per dollar and, where the search runs were metered (profiles with a `power`
section, sim/planner/energy.py), output tokens per joule of GPU energy (metered points only). Each
candidate's operating points (the search points within the SLOs, without the bracket's low-rate
probes: sim.planner.knobs.operating_points) are one colour per hardware and one marker per TP; the
frontier is a line whose points are labelled with their candidate and rate per replica; the
recommendation's operating point (target / replicas, the search point at or below it) is a black
star. The legend sits inside the figure, below the panels, so long `--search` labels cannot push it
off the axes."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

HARDWARE_COLORS = ("tab:blue", "tab:orange", "tab:purple", "tab:brown", "tab:cyan", "tab:olive")
TP_MARKERS = {1: "o", 2: "s", 4: "^", 8: "D"}
MAX_LABELS = 6  # frontier points labelled per panel (the rest are on the line, unlabelled)
PANELS = (("tok_s_per_gpu", "output tok/s per GPU", 1.0), ("tok_per_usd", "output M tokens per dollar", 1e-6))
JOULE_PANEL = ("tok_per_joule", "output tokens per joule", 1.0)  # of GPU energy


def pareto_figure(plan: dict) -> Figure:
    from matplotlib.figure import Figure

    from sim.planner.knobs import operating_points, pareto_frontier

    every_point = operating_points(plan["candidates"])
    kinds = list(dict.fromkeys(p["hardware"] for p in every_point))
    panels = PANELS + ((JOULE_PANEL,) if any(JOULE_PANEL[0] in p for p in every_point) else ())
    fig = Figure(figsize=(5.5 * len(panels), 5.2), layout="constrained")
    axes = fig.subplots(1, len(panels))
    star = _recommended_point(plan, every_point)
    x_mid = (min((p["tok_s_per_user"] for p in every_point), default=0) +
             max((p["tok_s_per_user"] for p in every_point), default=0)) / 2
    for ax, (key, label, scale) in zip(axes, panels, strict=True):
        points = [p for p in every_point if key in p]
        for hardware in kinds:
            for tp in sorted({p["tp"] for p in points if p["hardware"] == hardware}):
                mine = [p for p in points if p["hardware"] == hardware and p["tp"] == tp]
                ax.scatter([p["tok_s_per_user"] for p in mine], [p[key] * scale for p in mine], s=18, alpha=0.6,
                           color=HARDWARE_COLORS[kinds.index(hardware) % len(HARDWARE_COLORS)],
                           marker=TP_MARKERS.get(tp, "x"), label=f"{hardware} tp{tp}")
        frontier = sorted(pareto_frontier(points, key), key=lambda p: p["tok_s_per_user"])
        ax.plot([p["tok_s_per_user"] for p in frontier], [p[key] * scale for p in frontier], color="tab:green",
                linewidth=1.5, label="Pareto frontier")
        for p in frontier[:: max(1, len(frontier) // MAX_LABELS)][:MAX_LABELS]:
            right = p["tok_s_per_user"] > x_mid  # labels lean inwards, so none leaves the axes
            ax.annotate(f"{_short(p)}\n{p['rate_qps_per_replica']:.3g} req/s", (p["tok_s_per_user"], p[key] * scale),
                        textcoords="offset points", xytext=(-4 if right else 4, 4), fontsize=6.5,
                        ha="right" if right else "left")
        if star is not None and key in star:
            ax.plot([star["tok_s_per_user"]], [star[key] * scale], marker="*", markersize=15, color="black",
                    linestyle="none", label=f"recommended: {_short(star)} at {star['rate_qps_per_replica']:.3g} "
                                            f"req/s per replica")
        ax.set(xlabel="per-user speed (output tok/s per user = 1 / mean TPOT)", ylabel=label,
               title=f"{label} vs interactivity, {plan['model']}")
        ax.set_ylim(bottom=0, top=ax.get_ylim()[1] * 1.12)  # room for the top label
        ax.ticklabel_format(useOffset=False, style="plain")
        ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=min(4, max(1, len(labels))), fontsize=7.5)
    return fig


def _short(p: dict) -> str:
    knobs = "".join(f" {k}={v}" for k, v in p["knobs"].items())
    return f"{p['hardware']} tp{p['tp']}{knobs}"


def _recommended_point(plan: dict, points: list[dict]) -> dict | None:
    """The recommendation's operating point: its own search point at the highest rate not above
    target / replicas (what each replica carries on average)."""
    best = plan.get("recommended")
    if best is None:
        return None
    rate = plan["target_qps"] / best["replicas"]
    same = (best["hardware"], best["tp"], best["policy"], best["knobs"])
    mine = [p for p in points if (p["hardware"], p["tp"], p["policy"], p["knobs"]) == same
            and p["rate_qps_per_replica"] <= rate * 1.0001]
    return max(mine, key=lambda p: p["rate_qps_per_replica"], default=None)
