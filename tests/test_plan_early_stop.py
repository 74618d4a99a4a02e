"""A verification run stops as soon as it is certain to fail: the verdict equals the full run's, a
passing run is never stopped, and the stopping count is exact for np.percentile's interpolation."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_plan_verify import bursty_trace

from sim.inputs.config import EngineConfig
from sim.inputs.slo import slo_report
from sim.inputs.workload.transforms import scale_rate
from sim.planner.slo import parse_slo
from sim.planner.verify import verification_run
from sim.run.simulate import simulate
from sim.run.summary import requests_frame

BASE = EngineConfig(model="llama-3-8b")
SLO = parse_slo(["ttft_p99=0.5s", "tpot_p99=50ms"])


def test_a_failing_run_stops_early_with_the_full_runs_verdict():
    trace = bursty_trace()
    full = verification_run(BASE, trace, 1, 12.0, SLO)
    early = verification_run(BASE, trace, 1, 12.0, SLO, stop_failing=True)
    assert full["passes"] is False and full["stopped_early"] is None
    assert early["passes"] is False
    stop = early["stopped_early"]
    assert stop is not None and stop["at_s"] < full["sim_duration_s"]
    assert 0 < stop["n_judged"] < full["n_requests"] == early["n_requests"]
    assert "whatever follows" in stop["reason"]


def test_a_passing_run_is_never_stopped_and_matches_the_full_run():
    trace = bursty_trace()
    full = verification_run(BASE, trace, 4, 12.0, SLO)
    watched = verification_run(BASE, trace, 4, 12.0, SLO, stop_failing=True)
    assert full["passes"] and watched["stopped_early"] is None
    assert watched == full


def test_the_stop_comes_when_the_count_above_the_limit_makes_the_p99_certain():
    """At the stop, exactly the needed number of finished requests is above the limit."""
    trace = bursty_trace()
    early = verification_run(BASE, trace, 1, 12.0, SLO, stop_failing=True)
    n = early["n_requests"]
    needed = n - (99 * (n - 1)) // 100
    assert f"{needed} of {n} requests above" in early["stopped_early"]["reason"]
    result = simulate(EngineConfig.model_validate({**BASE.model_dump(), "latency_attribution": False}),
                      scale_rate(trace, target_qps=12.0))
    frame = requests_frame(result)
    assert not slo_report(frame, SLO, result.sim_duration_s)["met"]


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.floats(0.0, 10.0), min_size=1, max_size=400), extra=st.integers(0, 400),
       percentile=st.sampled_from([50, 90, 95, 99]), limit=st.floats(0.0, 10.0))
def test_the_needed_count_makes_any_larger_sample_fail(values, extra, percentile, limit):
    """If the values seen already hold N - floor(q (N-1) / 100) above the limit, the q-th percentile of
    any m <= N values containing them is above it (m = seen + more values, whatever they are)."""
    n = len(values) + extra
    needed = n - (percentile * (n - 1)) // 100
    over = sum(v > limit for v in values)
    if over < needed:
        return
    for more in (np.zeros(extra), np.full(extra, 10.0)):
        assert np.percentile(np.concatenate([values, more]), percentile) > limit
