"""The power validation data and bench (bench/data/power_mlenergy_v3.csv, bench/bench_power.py):
split by configuration, every row sourced, the digitiser reads charts back, and a fit row and a
score row simulated with the bundled (refitted) weights land near their measured J per token."""

from __future__ import annotations

import csv

import pytest

from bench.bench_power import DATA, modelled_j, simulate_row
from calibrate.digitise_svg_chart import digitise


def rows() -> list[dict]:
    with DATA.open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_split_is_by_configuration_and_every_row_is_sourced():
    sides: dict[str, set[str]] = {}
    for row in rows():
        sides.setdefault(row["config"], set()).add(row["split"])
        assert row["source"].startswith("ML.ENERGY blog") and "ml.energy/blog" in row["source"]
        assert float(row["j_per_output_token"]) > 0
    assert all(len(s) == 1 for s in sides.values())  # no configuration on both sides
    n_score = sum(1 for r in rows() if r["split"] == "score")
    assert n_score >= len(rows()) / 2


AXES = """<g id="axes_1">
<g id="xtick_1"><use xlink:href="#m" x="10" y="100"/><!-- 0 --></g>
<g id="xtick_2"><use xlink:href="#m" x="110" y="100"/><!-- 100 --></g>
<g id="ytick_1"><use xlink:href="#m" x="10" y="100"/><!-- {y0} --></g>
<g id="ytick_2"><use xlink:href="#m" x="10" y="0"/><!-- {y1} --></g>
<g id="line2d_9">
 <path d="M 35 75 L 60 50" clip-path="url(#p)" style="fill: none; stroke: #3498db"/>
</g>"""


@pytest.mark.parametrize("y0, y1, expected", [("0", "2", [25, 0.5, 50, 1.0]),
                                              (r"$\mathdefault{10^{-1}}$", r"$\mathdefault{10^{1}}$",
                                               [25, 10 ** -0.5, 50, 1.0])])
def test_digitiser_maps_points_back_through_linear_and_log_ticks(y0, y1, expected):
    (axes,) = digitise(AXES.replace("{y0}", y0).replace("{y1}", y1))
    assert [v for point in axes["lines"]["3498db"] for v in point] == pytest.approx(expected)


def test_modelled_energy_is_idle_plus_weighted_utilisation_seconds():
    run = {"busy_s": 10.0, "duration_s": 12.0, "compute_s": 1.0, "memory_s": 5.0, "gpus": 2, "output_tokens": 100.0}
    joules = 2 * ((100 + 600 * (2 * 1.0 + 1 * 5.0) / 10) * 10 + 100 * 2)
    assert modelled_j(run, 100.0, 700.0, 2.0, 1.0) == pytest.approx(joules / 100)
    assert modelled_j(run, 100.0, 700.0, 4.0, 4.0) == pytest.approx(2 * (700 * 10 + 100 * 2) / 100)  # clamped


@pytest.mark.parametrize("config, batch, within", [("llama-3.1-8b/h100-sxm x1", "32", 0.10),
                                                   ("llama-3.1-405b/h100-sxm x8", "64", 0.15)])
def test_bundled_weights_predict_measured_j_per_token(config, batch, within):
    """One fit row and one score row at the bundled (refitted) weights; docs/power.md has the table."""
    row = next(r for r in rows() if r["config"] == config and r["batch_size"] == batch)
    run = simulate_row(row, row["gpu"])
    assert run["j_per_token"] == pytest.approx(float(row["j_per_output_token"]), rel=within)
