"""simulate and sweep say when the offered load exceeds capacity, and why requests were rejected."""

from __future__ import annotations

import json

import numpy as np
from typer.testing import CliRunner

from sim.cli import app
from sim.run.load_check import QUEUE_GROWTH_WARN_S_PER_MIN, queue_growth, rejections

runner = CliRunner()


def _table(arrival, delay, status=None, reasons=None):
    n = len(arrival)
    return {"arrival_s": np.asarray(arrival, float), "queue_delay_s": np.asarray(delay, float),
            "status": np.array(status or ["FINISHED"] * n), "finish_s": np.asarray(arrival, float) + 1.0,
            "reject_reason": reasons or [None] * n}


def test_queue_growth_is_the_slope_of_queue_delay_on_arrival():
    arrival = np.arange(120.0)  # two minutes, one request a second
    growing = queue_growth(_table(arrival, 0.5 * arrival))  # each request waits half a second more per second
    assert abs(growing["queue_growth_s_per_min"] - 30.0) < 1e-9 and growing["overloaded"]
    bursty = np.where(arrival % 20 < 5, 3.0, 0.1)  # bursts that drain
    stable = queue_growth(_table(arrival, bursty))
    assert abs(stable["queue_growth_s_per_min"]) < QUEUE_GROWTH_WARN_S_PER_MIN and not stable["overloaded"]
    assert queue_growth(_table(arrival[:5], arrival[:5]))["queue_growth_s_per_min"] is None  # too few


def test_rejections_first_reason_and_kinds():
    status = ["FINISHED", "REJECTED", "REJECTED", "REJECTED"]
    reasons = [None, "prompt of 9000 tokens leaves no room under max_model_len=8192", "needs 700 KV blocks; 500",
               "prompt of 8500 tokens leaves no room under max_model_len=8192"]
    table = _table([0.0, 1.0, 2.0, 3.0], [0.0] * 4, status, reasons)
    table["finish_s"] = np.array([5.0, 3.0, 1.0, 2.0])  # rejected at 3, 1, 2 s
    got = rejections(table)
    assert got["n"] == 3 and got["first_reason"] == reasons[2]
    assert got["kinds"] == ("prompt of N tokens leaves no room under max_model_len=N (2); needs N KV blocks; N (1)")


def test_simulate_warns_when_overloaded_and_not_when_stable():
    hot = runner.invoke(app, ["simulate", "--qps", "40", "--max-requests", "600"])
    assert hot.exit_code == 0, hot.output
    assert "warning: offered load exceeds capacity" in hot.output and "s per minute" in hot.output
    calm = runner.invoke(app, ["simulate", "--qps", "2", "--max-requests", "100", "--json"])
    summary = json.loads(calm.stdout)
    assert summary["overload"]["overloaded"] is False and summary["rejections"]["n"] == 0


def test_sweep_names_the_overloaded_points(tmp_path):
    # the sweep runs plan's engine (the vLLM preset, 1024 sequences on an H100), which keeps up at 40 req/s
    result = runner.invoke(app, ["sweep", "--grid", "qps=2,200", "--max-requests", "400", "--out", str(tmp_path / "s"),
                                 "--no-plots", "--workers", "1"])
    assert result.exit_code == 0, result.output
    assert "warning: 1 of 2 points are overloaded" in result.output and "qps=200" in result.output
