"""The latency-attribution figure: for each label (a policy, a configuration), stacked bars of
the p50 and p99 requests' parts (from summary.json's `latency_attribution`)."""

from __future__ import annotations

import numpy as np

from sim.run.attribution import PARTS


def attribution_bars(summaries: dict[str, dict]) -> tuple[list[str], dict[str, np.ndarray]]:
    """Bar labels (`<label> p50`, `<label> p99`) and, per part, the seconds of each bar."""
    labels: list[str] = []
    heights: dict[str, list[float]] = {part: [] for part in PARTS}
    for label, summary in summaries.items():
        attribution = summary.get("latency_attribution")
        if not attribution:
            continue
        for rank in ("p50", "p99"):
            labels.append(f"{label} {rank}")
            for part in PARTS:
                heights[part].append(attribution[f"{rank}_{part}_s"])
    return labels, {part: np.asarray(values) for part, values in heights.items()}


def plot_attribution(ax, summaries: dict[str, dict], title: str = "") -> None:
    """Stacked bars of the p50 and p99 requests' latency parts, per label (parts never used are left
    out of the legend). Draws on the given matplotlib `ax`."""
    labels, heights = attribution_bars(summaries)
    bottom = np.zeros(len(labels))
    for part in PARTS:
        values = heights[part]
        if not values.size or not values.any():
            continue
        ax.bar(labels, values, bottom=bottom, label=part)
        bottom += values
    ax.set_ylabel("seconds (end-to-end latency of that request)")
    ax.set_title(title or "where the p50 and p99 requests' time went")
    ax.tick_params(axis="x", labelrotation=30)
    ax.legend(fontsize="small")
    ax.grid(axis="y", alpha=0.3)


def save_attribution_figure(path, summaries: dict[str, dict], title: str = ""):
    """Write the figure as a PNG (atomically); returns the path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sim.output import write_png

    figure, ax = plt.subplots(figsize=(max(6.0, 1.1 * 2 * len(summaries)), 4.5))
    plot_attribution(ax, summaries, title)
    figure.tight_layout()
    out = write_png(path, figure)
    plt.close(figure)
    return out
