"""`plan --uncertainty N`: the recommended cluster's capacity band under perturbed cost models.

A small hand-made trace (200 requests at ~6 req/s, constant lengths) keeps each rate search short."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.cost.time_scale import TIME_SCALE_KEYS
from sim.inputs.config import EngineConfig
from sim.inputs.workload.trace import Trace
from sim.planner.band import band_line, capacity_band, draw_outcome, recommended_config
from sim.planner.burst import search_slice
from sim.planner.plan import SearchSettings, make_plan
from sim.planner.slo import parse_slo
from tests.test_cli_foundation import assert_one_line_error

SLO = parse_slo(["ttft_p99=0.5s", "tpot_p99=40ms"])
BASE = EngineConfig(model="llama-3-8b", seed=3)
SETTINGS = SearchSettings(max_requests=100)
TARGET_QPS = 12.0


def run_in_order(fn, arg_tuples):
    return [fn(*args) for args in arg_tuples]


@pytest.fixture(scope="module")
def trace() -> Trace:
    rng = np.random.default_rng(0)
    gaps = rng.exponential(1 / 6.0, 200)
    return Trace(np.cumsum(gaps) - gaps[0], np.full(200, 800), np.full(200, 120), source="steady")


@pytest.fixture(scope="module")
def planned(trace) -> dict:
    return make_plan(trace, BASE, ["h100-sxm"], [1], ["chunked"], SLO, TARGET_QPS, SETTINGS, 1)


@pytest.fixture(scope="module")
def banded(planned, trace) -> dict:
    return capacity_band(planned, BASE, trace, SLO, SETTINGS, 4, run_in_order)


def test_band_is_ordered_and_covers_every_draw(banded, planned):
    assert banded["n_draws"] == 4 and len(banded["draws"]) == 4
    rates = [d["max_qps_per_replica"] for d in banded["draws"]]
    triple = banded["max_qps_per_replica"]
    assert min(rates) <= triple["p10"] <= triple["p50"] <= triple["p90"] <= max(rates)
    assert len({tuple(d["time_scale"].values()) for d in banded["draws"]}) == 4  # four different cost models
    assert set(banded["draws"][0]["time_scale"]) == set(TIME_SCALE_KEYS)
    # the plan verified its cluster, so each draw replayed the whole workload at that replica count
    assert banded["verified_replicas"] == planned["recommended"]["replicas"]
    assert 0.0 <= banded["passes_share"] <= 1.0
    assert set(banded["p99_ms"]) == {"ttft", "tpot", "e2e"}
    assert banded["p99_ms"]["tpot"]["p10"] <= banded["p99_ms"]["tpot"]["p90"]
    assert "qps/replica" in band_line(banded) and "meet the SLOs in" in band_line(banded)


def test_band_is_reproducible_with_a_seed(banded, planned, trace):
    again = capacity_band(planned, BASE, trace, SLO, SETTINGS, 4, run_in_order)
    assert again == banded
    other_seed = EngineConfig(model="llama-3-8b", seed=4)
    moved = capacity_band(planned, other_seed, trace, SLO, SETTINGS, 4, run_in_order)
    assert [d["time_scale"] for d in moved["draws"]] != [d["time_scale"] for d in banded["draws"]]


def test_unit_draw_reproduces_the_plan_and_slower_costs_sustain_less(planned, trace):
    """A draw of 1.0 everywhere is the plan's own cost model: same per-replica rate. Doubling every
    time can only lower the rate one replica sustains."""
    best = planned["recommended"]
    cfg = recommended_config(BASE, best)
    piece = search_slice(trace, SETTINGS.max_requests, SETTINGS.warmup_fraction, SETTINGS.sizing)

    def rate_under(factor: float) -> float | None:
        scale = dict.fromkeys(TIME_SCALE_KEYS, factor)
        return draw_outcome(cfg, scale, piece, SLO, planned["search"], best["max_qps_per_replica"], TARGET_QPS,
                            trace, None)["max_qps_per_replica"]

    assert rate_under(1.0) == pytest.approx(best["max_qps_per_replica"])
    slower = rate_under(2.0)
    assert slower is None or slower < best["max_qps_per_replica"]


def test_cli_reports_the_band(tmp_path):
    out = tmp_path / "plan"
    args = ["plan", "--workload", "splitwise_conv", "--model", "llama-3-8b", "--max-requests", "120", "--workers",
            "1", "--no-verify", "--slo", "ttft_p99=1s", "--slo", "tpot_p99=0.05s", "--hardware", "h100-sxm",
            "--tp", "1", "--policy", "chunked", "--target-qps", "20", "--uncertainty", "2", "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "uncertainty (2 cost-model draws, p10/p50/p90): qps/replica" in result.stdout
    band = json.loads((out / "plan.json").read_text())["recommended"]["uncertainty"]
    assert band["n_draws"] == 2 and "passes_share" not in band  # --no-verify: no whole-workload replays
    assert band["max_qps_per_replica"]["p10"] <= band["max_qps_per_replica"]["p90"]


@pytest.mark.parametrize("n", ["1", "0", "-3"])
def test_fewer_than_two_draws_is_one_line_exit_2(n):
    args = ["plan", "--workload", "splitwise_conv", "--model", "llama-3-8b", "--slo", "ttft_p99=1s", "--target-qps",
            "5",
            "--uncertainty", n]
    assert_one_line_error(CliRunner().invoke(app, args), "--uncertainty", "at least 2")
