"""Energy in plans (issue 49, sim/planner/energy.py): rows carry the verified cluster's watts, kW, J per
token and electricity; unmetered profiles add no keys; `--power-budget-kw` changes the answer or refuses."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.inputs.config import EngineConfig
from sim.inputs.workload.trace import Trace
from sim.planner.plan import SearchSettings, make_plan
from sim.planner.slo import parse_slo
from sim.planner.verify import verification_run

SLO = parse_slo(["ttft_p99=1s", "tpot_p99=50ms"])
BASE = EngineConfig(model="llama-3-8b")
TARGET_QPS = 4.0
SETTINGS = SearchSettings(max_requests=100)
PRICES = {"h100-sxm": 1.0}  # the H100 cluster cheaper than the A100 one, and drawing more: the budget's trade


def steady_trace(n: int = 300, seed: int = 0) -> Trace:
    gaps = np.random.default_rng(seed).exponential(1.0, n)
    return Trace(np.cumsum(gaps) - gaps[0], np.full(n, 800), np.full(n, 120), source="steady")


@pytest.fixture(scope="module")
def trace() -> Trace:
    return steady_trace()


def plan(trace, hardware=("h100-sxm", "a100-80g-sxm"), budget_kw=None, electricity=(0.08, 1.2)):
    return make_plan(trace, BASE, list(hardware), [1], ["chunked"], SLO, TARGET_QPS, SETTINGS, 1, prices=PRICES,
                     electricity=electricity, power_budget_kw=budget_kw)


@pytest.fixture(scope="module")
def unbudgeted(trace):
    return plan(trace)


def test_rows_carry_the_verified_runs_energy(trace, unbudgeted):
    rows = {r["hardware"]: r for r in unbudgeted["candidates"]}
    assert unbudgeted["recommended"]["hardware"] == "h100-sxm"  # the cheaper cluster, with PRICES
    for row in rows.values():
        energy = row["energy"]
        assert energy["from"].startswith("verification run")
        run = next(r for r in row["verification"] if r["passes"] and r["replicas"] == row["replicas"])
        assert energy["mean_power_w_per_gpu"] == run["energy"]["mean_power_w_per_gpu"]
        assert energy["gpu_kw"] == pytest.approx(energy["mean_power_w_per_gpu"] * row["gpus"] / 1e3)
        assert energy["facility_kw"] == pytest.approx(energy["gpu_kw"] * 1.2)
        tokens_per_s = TARGET_QPS * unbudgeted["mean_output_tokens"]
        assert energy["j_per_output_token"] == pytest.approx(energy["gpu_kw"] * 1e3 / tokens_per_s)
        assert energy["electricity_usd_per_day"] == pytest.approx(energy["facility_kw"] * 24 * 0.08)
        assert energy["gpu_usd_per_day"] == pytest.approx(row["cost_per_hour_usd"] * 24)
    # a direct run of the verified cluster gives the same watts (no extra simulation was needed for them)
    row = rows["a100-80g-sxm"]
    direct = verification_run(BASE.model_copy(update={"hardware": "a100-80g-sxm", "policy": "chunked"}), trace,
                              row["replicas"], TARGET_QPS, SLO)
    assert direct["energy"]["mean_power_w_per_gpu"] == pytest.approx(row["energy"]["mean_power_w_per_gpu"])
    # the A100 cluster (400 W boards) draws less than the H100 one here: the budget below has a trade to make
    assert rows["a100-80g-sxm"]["energy"]["facility_kw"] < rows["h100-sxm"]["energy"]["facility_kw"]
    assert unbudgeted["energy"]["power_budget_kw"] is None and "budget" not in unbudgeted["energy"]
    assert all("tok_per_joule" in p for p in unbudgeted["pareto_per_joule"])


def test_a_tight_budget_picks_the_lower_power_cluster(trace, unbudgeted):
    rows = {r["hardware"]: r for r in unbudgeted["candidates"]}
    between = (rows["a100-80g-sxm"]["energy"]["facility_kw"] + rows["h100-sxm"]["energy"]["facility_kw"]) / 2
    budgeted = plan(trace, budget_kw=between)
    best = budgeted["recommended"]
    assert best["hardware"] == "a100-80g-sxm" and best["energy"]["facility_kw"] <= between
    assert best["cost_per_hour_usd"] > unbudgeted["recommended"]["cost_per_hour_usd"]
    verdict = budgeted["energy"]["budget"]
    assert verdict["without_budget"]["cluster"].endswith("h100-sxm tp1 chunked")
    assert verdict["n_over_budget"] == 1 and "instead of" in verdict["line"]
    over = next(r for r in budgeted["candidates"] if r["hardware"] == "h100-sxm")
    assert over["energy"]["within_budget"] is False


def test_a_budget_nothing_fits_refuses_with_one_line(trace, unbudgeted):
    lowest = min(r["energy"]["facility_kw"] for r in unbudgeted["candidates"])
    budgeted = plan(trace, budget_kw=lowest * 0.9)
    assert budgeted["recommended"] is None
    assert budgeted["energy"]["budget"]["line"].startswith(f"no cluster meets the SLOs within {lowest * 0.9:g} kW")


def test_unmetered_profiles_add_no_energy_keys(trace):
    result = plan(trace, hardware=("l40s",))  # l40s has no power section (docs/power.md)
    assert "energy" not in result and "pareto_per_joule" not in result
    text = json.dumps(result)
    assert '"energy"' not in text and "tok_per_joule" not in text


def test_bad_budget_is_one_line_exit_2():
    result = CliRunner().invoke(app, ["plan", "--target-qps", "1", "--slo", "ttft_p99=1s", "--power-budget-kw", "-3"])
    assert result.exit_code == 2
    assert "--power-budget-kw" in result.output and "Traceback" not in result.output
