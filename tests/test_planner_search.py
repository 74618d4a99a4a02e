"""Rate search against an oracle: a monotone pass/fail with a known threshold; SLO parsing and judging."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.errors import InputError
from sim.planner.evaluate import binding_constraint, judge
from sim.planner.search import STEPS_PER_DOUBLING, lattice_rate, search_max_rate
from sim.planner.slo import parse_slo

MIN_QPS, MAX_QPS = 1 / 128, 1024.0
K_MIN, K_MAX = -7 * STEPS_PER_DOUBLING, 10 * STEPS_PER_DOUBLING


@dataclass
class Verdict:
    rate_qps: float
    passes: bool


def threshold_search(threshold_qps: float, start_qps: float):
    calls = []

    def evaluate(rate):
        calls.append(rate)
        return Verdict(rate, rate <= threshold_qps)

    return search_max_rate(evaluate, start_qps, MIN_QPS, MAX_QPS), calls


def oracle_max(threshold_qps: float) -> float | None:
    """The largest lattice rate within [MIN_QPS, MAX_QPS] that is <= threshold, by brute force."""
    passing = [lattice_rate(k) for k in range(K_MIN, K_MAX + 1) if lattice_rate(k) <= threshold_qps]
    return max(passing) if passing else None


@given(log2_threshold=st.floats(-9.0, 12.0), log2_start=st.floats(-8.0, 11.0))
def test_search_finds_the_largest_passing_lattice_rate(log2_threshold, log2_start):
    threshold = 2.0**log2_threshold
    outcome, calls = threshold_search(threshold, 2.0**log2_start)
    expected = oracle_max(threshold)
    assert outcome.max_qps == expected
    assert len(calls) == len(set(calls))  # each rate simulated once
    assert len(calls) <= 2 * 10 + 6  # bracketing + bisection, never a scan
    assert [p.rate_qps for p in outcome.points] == sorted(calls)
    if expected is None:
        assert outcome.limit_point.rate_qps == lattice_rate(K_MIN) and not outcome.limit_point.passes
    elif outcome.hit_ceiling:
        assert expected == lattice_rate(K_MAX) and outcome.limit_point is None
    else:  # the binding point is the next lattice rate: relative tolerance 2^(1/16) - 1
        assert outcome.limit_point.rate_qps == pytest.approx(expected * 2 ** (1 / STEPS_PER_DOUBLING))
        assert not outcome.limit_point.passes


def test_search_is_start_independent_and_monotone_in_the_threshold():
    thresholds = np.geomspace(0.05, 500, 25)
    results = [threshold_search(t, start)[0].max_qps for t in thresholds for start in (0.1, 1.0, 64.0)]
    by_threshold = np.array(results).reshape(len(thresholds), 3)
    assert (by_threshold == by_threshold[:, :1]).all()
    assert (np.diff(by_threshold[:, 0]) >= 0).all()


def test_parse_slo_accepts_every_key_and_rejects_bad_ones():
    slo = parse_slo(["ttft_p99=2s", "tpot_p50=0.05s", "e2e_p90=30s"], goodput_min=0.95)
    assert [(s.key, s.column, s.limit_s) for s in slo.limits] == [
        ("ttft_p99", "ttft_s", 2.0), ("tpot_p50", "tpot_s", 0.05), ("e2e_p90", "e2e_s", 30.0)]
    assert slo.to_dict() == {"limits_s": {"ttft_p99": 2.0, "tpot_p50": 0.05, "e2e_p90": 30.0}, "goodput_min": 0.95}
    for bad, needle in ((["ttft_p97=1s"], "unknown SLO key"), (["ttft_p99"], "KEY=LIMIT"),
                        (["ttft_p99=-1"], "> 0"), (["ttft_p99=abc"], "> 0"),
                        (["ttft_p99=1s", "ttft_p99=2s"], "twice"), ([], "at least one")):
        with pytest.raises(InputError, match=needle):
            parse_slo(bad)
    with pytest.raises(InputError, match="--min-finished"):
        parse_slo(["ttft_p99=1s"], goodput_min=1.5)


def frame(ttft, tpot, status=None, reasons=None) -> pd.DataFrame:
    n = len(ttft)
    return pd.DataFrame({"ttft_s": ttft, "tpot_s": tpot, "e2e_s": np.asarray(ttft) + 1.0,
                         "status": status or ["FINISHED"] * n, "reject_reason": reasons or [None] * n})


def test_judge_takes_percentiles_over_finished_requests():
    ttft = np.linspace(0.01, 1.0, 100)  # p50 = 0.505, p99 = 0.9901
    slo = parse_slo(["ttft_p99=1s", "ttft_p50=0.5s", "tpot_p90=0.1s"])
    point = judge(frame(ttft, np.full(100, 0.05)), 3.0, slo)
    assert point.values_s["ttft_p99"] == pytest.approx(0.9901)
    assert point.ratios["ttft_p50"] == pytest.approx(1.01)
    assert not point.passes and binding_constraint(point, slo) == "ttft_p50"
    loose = parse_slo(["ttft_p99=1s", "tpot_p90=0.1s"])
    assert judge(frame(ttft, np.full(100, 0.05)), 3.0, loose).passes


def test_judge_goodput_and_kv_capacity():
    status = ["FINISHED"] * 98 + ["REJECTED"] * 2
    slo = parse_slo(["ttft_p99=10s"])
    kv = judge(frame(np.full(100, 0.1), np.full(100, 0.01), status,
                     [None] * 98 + ["prompt+output need 900 KV blocks; the cache holds 50"] * 2), 1.0, slo)
    assert kv.goodput == 0.98 and kv.n_rejected_kv == 2 and not kv.passes
    assert binding_constraint(kv, slo) == "kv_capacity"
    other = judge(frame(np.full(100, 0.1), np.full(100, 0.01), status, [None] * 98 + ["limits"] * 2), 1.0, slo)
    assert binding_constraint(other, slo) == "goodput"
    assert judge(frame(np.full(100, 0.1), np.full(100, 0.01), status), 1.0, parse_slo(["ttft_p99=10s"], 0.98)).passes


def test_judge_without_values_fails_with_infinite_ratio():
    point = judge(frame([0.1, 0.2], [math.nan, math.nan]), 1.0, parse_slo(["tpot_p99=1s"]))
    assert point.values_s["tpot_p99"] is None and point.ratios["tpot_p99"] == math.inf and not point.passes


@given(st.floats(0.02, 900.0), st.floats(0.0, 0.3), st.floats(MIN_QPS, MAX_QPS))
def test_confirmation_steps_down_to_the_largest_rate_the_surer_verdict_passes(threshold_qps, shortfall, start_qps):
    """The quick verdict passes up to `threshold`; the surer one (a longer run) only up to a lower rate:
    the search answers the surer verdict's largest lattice rate, confirming each rate at most once."""
    sure_threshold_qps = threshold_qps * (1 - shortfall)
    confirmed = []

    def confirm(rate):
        confirmed.append(rate)
        return Verdict(rate, rate <= sure_threshold_qps)

    outcome = search_max_rate(lambda rate: Verdict(rate, rate <= threshold_qps), start_qps, MIN_QPS, MAX_QPS,
                              confirm=confirm)
    expected = oracle_max(sure_threshold_qps)
    assert outcome.max_qps == (None if expected is None else pytest.approx(expected))
    assert len(confirmed) == len(set(confirmed))
    by_rate = {p.rate_qps: p.passes for p in outcome.points}
    if expected is not None:
        assert by_rate[outcome.max_qps] and outcome.max_qps in confirmed
        if outcome.limit_point is not None:
            assert not outcome.limit_point.passes and outcome.limit_point.rate_qps / outcome.max_qps == pytest.approx(
                2 ** (1 / STEPS_PER_DOUBLING))
