"""Sweep figures: which files a grid gets, and that they are PNGs."""

from __future__ import annotations

import pandas as pd

from sim.sweep.plots import plot_sweep

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _frame(policies, block_sizes) -> pd.DataFrame:
    rows = [{"point_id": f"{p}{b}", "policy": p, "block_size": b, "request_throughput": b / 8,
             "ttft_s_p99": None if b == 64 else 0.1 * b} for p in policies for b in block_sizes]
    return pd.DataFrame(rows)


def test_a_one_key_grid_gets_a_line_panel_only(tmp_path):
    paths = plot_sweep(_frame(["chunked"], [8, 16, 64]), {"block_size": [8, 16, 64], "policy": ["chunked"]},
                       tmp_path)
    assert [p.name for p in paths] == ["sweep_block_size.png"]
    assert paths[0].read_bytes()[:8] == PNG_MAGIC
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sweep_block_size.png"]  # no temp files left


def test_two_keys_get_heatmaps_of_the_metrics_present_even_categorical(tmp_path):
    grid = {"policy": ["chunked", "radix"], "block_size": [8, 64]}
    names = [p.name for p in plot_sweep(_frame(*grid.values()), grid, tmp_path)]
    assert names == ["sweep_policy.png", "sweep_block_size.png", "heatmap_request_throughput.png",
                     "heatmap_ttft_s_p99.png"]


def test_nothing_to_plot_without_a_varying_key(tmp_path):
    assert plot_sweep(_frame(["chunked"], [8]), {"block_size": [8]}, tmp_path) == []
    assert not list(tmp_path.iterdir())
