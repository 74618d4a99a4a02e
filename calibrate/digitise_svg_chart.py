"""Read the plotted points back out of a matplotlib SVG chart (for published figures whose numbers
are not tabulated: bench/data/power_mlenergy_v3.csv).

Each axes' labelled ticks give its maps from SVG coordinates to data (linear, or log where the labels
are powers of ten); each clipped data line's vertices are mapped back. Precision: the SVG's
coordinates carry six decimals, so a value is exact to well under 0.1 % of its axis range; what
the authors rounded before plotting is not recovered.

    python -m calibrate.digitise_svg_chart FIGURE.svg     # one block per axes: title words, then colour: points
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable

GRID_COLOUR = "b0b0b0"  # matplotlib's grid lines, not data


def _tick_value(label: str) -> tuple[float, bool]:
    """(value, is a power-of-ten label)."""
    power = re.search(r"10\^\{([−\-]?\d+)\}", label)
    if power:
        return 10.0 ** int(power.group(1).replace("−", "-")), True
    return float(label.replace("−", "-").replace(",", "")), False


def _ticks(axes: str, kind: str) -> tuple[list[tuple[float, float]], bool]:
    """[(SVG coordinate, value)] of the axes' labelled `kind` ('x' or 'y') ticks, and whether log."""
    ticks, log = [], False
    for block in re.split(r'<g id="' + kind + r'tick_\d+">', axes)[1:]:
        label = re.search(r"<!-- (.*?) -->", block)
        mark = re.search(r'<use xlink:href="#[^"]+" x="([\d.]+)" y="([\d.]+)"', block)
        if not label or not mark:
            continue
        try:
            value, is_power = _tick_value(label.group(1))
        except ValueError:
            continue
        log |= is_power
        ticks.append((float(mark.group(1) if kind == "x" else mark.group(2)), value))
    return ticks, log


def _mapping(ticks: list[tuple[float, float]], log: bool) -> Callable[[float], float]:
    (p0, v0), (p1, v1) = ticks[0], ticks[-1]
    if log:
        l0, l1 = math.log10(v0), math.log10(v1)
        return lambda p: 10 ** (l0 + (p - p0) * (l1 - l0) / (p1 - p0))
    return lambda p: v0 + (p - p0) * (v1 - v0) / (p1 - p0)


def digitise(svg: str) -> list[dict]:
    """Per axes: {'labels': its text labels, 'lines': {colour: [(x, y), ...]}} (lines in drawing order;
    a colour drawn twice keeps its last line)."""
    out = []
    for axes in re.split(r'<g id="axes_\d+">', svg)[1:]:
        (x_ticks, x_log), (y_ticks, y_log) = _ticks(axes, "x"), _ticks(axes, "y")
        if len(x_ticks) < 2 or len(y_ticks) < 2:
            continue
        fx, fy = _mapping(x_ticks, x_log), _mapping(y_ticks, y_log)
        lines = {}
        for match in re.finditer(r'<g id="line2d_\d+">\s*<path d="([^"]+)"[^>]*clip-path[^>]*style="([^"]+)"', axes):
            path, style = match.groups()
            colour = re.search(r"stroke: #(\w+)", style)
            if colour is None or colour.group(1) == GRID_COLOUR:
                continue
            vertices = re.findall(r"(-?[\d.]+) (-?[\d.]+)", path)
            lines[colour.group(1)] = [(fx(float(x)), fy(float(y))) for x, y in vertices]
        labels = [t for t in re.findall(r"<!-- (.*?) -->", axes) if re.search(r"[A-Za-z]{2}", t)]
        out.append({"labels": labels, "lines": lines})
    return out


def main(path: str) -> None:
    with open(path, encoding="utf-8") as handle:
        for axes in digitise(handle.read()):
            print("## " + " | ".join(axes["labels"]))
            for colour, points in axes["lines"].items():
                print(f"#{colour}: " + ", ".join(f"({x:.4g}, {y:.4g})" for x, y in points))


if __name__ == "__main__":
    main(sys.argv[1])
