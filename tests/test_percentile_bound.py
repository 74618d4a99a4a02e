"""The batch-means upper bound on a percentile (sim.run.percentile_bound) and the longer draw a
steady-state check runs on (sim.inputs.workload.transforms.extend)."""

import pickle

import numpy as np
import pytest
from scipy.signal import lfilter
from scipy.stats import norm

from sim.inputs.workload import load_workload
from sim.inputs.workload.transforms import extend, tile
from sim.run.percentile_bound import close_call_growth, percentile_upper_bound


def _correlated_draw(rng: np.random.Generator, n: int, phi: float) -> np.ndarray:
    """A stationary Gaussian AR(1) series with unit variance: neighbours move together, as requests
    sharing a batch do."""
    noise = rng.standard_normal(n) * np.sqrt(1 - phi**2)
    return lfilter([1.0], [1.0, -phi], noise, zi=[phi * rng.standard_normal()])[0]


def test_the_bound_covers_a_correlated_series_p99_where_the_run_s_own_p99_does_not():
    rng = np.random.default_rng(7)
    true_p99 = norm.ppf(0.99)
    bounds, points = [], []
    for _ in range(200):
        values = _correlated_draw(rng, 8000, phi=0.98)  # stretches of 2,000: 40 correlation times
        bounds.append(percentile_upper_bound(values, 99, 4))
        points.append(float(np.percentile(values, 99)))
    bound_coverage = np.mean(np.array(bounds) >= true_p99)
    point_coverage = np.mean(np.array(points) >= true_p99)
    assert bound_coverage >= 0.85  # nominal 95 %
    assert point_coverage <= 0.6  # the run's own P99 is as often under as over
    assert all(b >= p for b, p in zip(bounds, points))


def test_the_bound_grows_with_the_spread_between_stretches_and_is_the_percentile_without_any():
    flat = np.full(1000, 2.0)
    assert percentile_upper_bound(flat, 99, 4) == pytest.approx(2.0)
    steady = np.tile(np.linspace(1.0, 2.0, 250), 4)
    drifting = np.concatenate([np.linspace(1.0, 2.0, 250) + shift for shift in (0.0, 0.1, 0.4, 0.0)])
    assert percentile_upper_bound(drifting, 99, 4) > percentile_upper_bound(steady, 99, 4) + 0.05
    assert percentile_upper_bound(steady, 99, 1) == pytest.approx(float(np.percentile(steady, 99)))
    assert percentile_upper_bound(np.array([np.nan, np.nan]), 99, 4) is None
    few = drifting[::8]  # 125 values: one P99 stretch's worth, so no spread to read
    assert percentile_upper_bound(few, 99, 4) == pytest.approx(float(np.percentile(few, 99)))
    assert percentile_upper_bound(few, 90, 4) > float(np.percentile(few, 90))  # 10 per P90 stretch: bounded


def test_a_close_call_asks_for_a_run_long_enough_to_decide_and_gives_up_past_the_cap():
    assert close_call_growth([(0.048, 0.052, 0.050)]) is None  # (2/2)^2 x 1.2 < 1.5 -> ... decided below
    growth = close_call_growth([(0.049, 0.0505, 0.050)])  # margin 1.5 ms, room 1 ms: 2.25 x 1.2
    assert growth == pytest.approx(2.25 * 1.2)
    assert close_call_growth([(0.0499, 0.052, 0.050)]) is None  # would take 21^2 times longer: fails
    assert close_call_growth([(0.051, 0.053, 0.050)]) is None  # already over the limit: not a close call
    assert close_call_growth([(0.040, 0.045, 0.050)]) is None  # bound within: decided


@pytest.fixture()
def poisson_spec(tmp_path):
    spec = tmp_path / "w.yaml"
    spec.write_text("synthetic:\n  arrival: {kind: poisson, rate_qps: 20.0}\n"
                    "  lengths: {prompt: {kind: fixed, value: 64}, output: {kind: fixed, value: 8}}\n"
                    "  n_requests: 200\nseed: 3\n")
    return spec


def test_a_synthetic_workload_is_drawn_longer_with_fresh_arrivals_not_repeated(poisson_spec):
    trace = load_workload(poisson_spec)
    longer = extend(trace, 1000)
    assert len(longer) == 1000
    gaps = np.diff(longer.arrival_s)
    tiled_gaps = np.diff(tile(trace, 1000).arrival_s)
    assert not np.allclose(gaps[200:399], gaps[:199])  # a tile repeats its gaps; a fresh draw does not
    assert np.allclose(tiled_gaps[200:399], tiled_gaps[:199])
    assert 1000 / longer.arrival_s[-1] == pytest.approx(20.0, rel=0.1)
    assert np.array_equal(extend(trace, 1000).arrival_s, longer.arrival_s)  # same seed, same draw
    assert pickle.loads(pickle.dumps(trace.redraw))(300).arrival_s.shape == (300,)


def test_a_trace_without_a_generator_is_tiled(poisson_spec):
    trace = load_workload(poisson_spec).take(np.arange(200))  # a cut keeps no generator
    assert trace.redraw is None
    assert np.array_equal(extend(trace, 500).arrival_s, tile(trace, 500).arrival_s)
    assert extend(trace, 100) is trace
