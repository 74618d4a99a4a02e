"""Steady state (sim.run.steady_state): a rate point passes only on a run long enough to show it and
whose queue kept up; a short slice is lengthened (tiled) rather than trusted (issue 45)."""

from __future__ import annotations

import numpy as np
import pytest

from sim.inputs.config import EngineConfig
from sim.inputs.workload.trace import Trace
from sim.inputs.workload.transforms import mean_qps, tile
from sim.planner.burst import search_slice
from sim.planner.evaluate import evaluate_rate
from sim.planner.slo import parse_slo
from sim.run.steady_state import MEASURED_LIFETIMES, steady_state


def table(arrival_s, e2e_s, queue_delay_s=None):
    arrival_s = np.asarray(arrival_s, dtype=float)
    e2e_s = np.broadcast_to(np.asarray(e2e_s, dtype=float), arrival_s.shape)
    delay = np.zeros_like(arrival_s) if queue_delay_s is None else np.asarray(queue_delay_s, dtype=float)
    return {"arrival_s": arrival_s, "finish_s": arrival_s + e2e_s, "queue_delay_s": delay,
            "status": np.array(["FINISHED"] * arrival_s.size)}


def test_a_slice_shorter_than_a_lifetime_is_too_short_to_tell():
    # the case: 1,000 requests at 70 req/s (14 s) while each lives 20 s
    reading = steady_state(table(np.arange(1000) / 70.0, 20.0), n_warmup=100)
    assert not reading.long_enough and reading.kept_up
    assert reading.measured_lifetimes == pytest.approx(900 / 70 / 20, rel=0.01)
    # enough requests to warm up one lifetime and judge four, with margin
    assert reading.needed_requests == pytest.approx(70 * 20 * 5 * 1.25, rel=0.01)
    assert "too short to tell" in reading.verdict()


def test_a_long_run_with_a_flat_queue_is_steady_and_a_growing_queue_is_not():
    arrival = np.arange(20_000) / 70.0
    assert steady_state(table(arrival, 20.0), n_warmup=2000).long_enough
    growing = steady_state(table(arrival, 20.0, queue_delay_s=arrival * 0.1), n_warmup=2000)  # 6 s per minute
    assert growing.long_enough and not growing.kept_up and "fell behind" in growing.verdict()


def test_tile_keeps_the_rate_and_repeats_the_requests():
    trace = Trace(np.array([0.0, 0.5, 2.0, 3.0]), np.array([10, 20, 30, 40]), np.array([1, 2, 3, 4]))
    tiled = tile(trace, 10)
    assert len(tiled) == 10 and np.all(np.diff(tiled.arrival_s) > 0)
    assert list(tiled.prompt_tokens) == [10, 20, 30, 40] * 2 + [10, 20]
    # one mean gap between copies: the arrival rate (n - 1) / span stays 3 / 3 s
    assert mean_qps(tile(trace, 400)) == pytest.approx(1.0, rel=0.01)


def test_tile_makes_every_copy_new_traffic_for_the_prefix_cache():
    # two requests sharing a first block (id 7), one of their own each
    trace = Trace(np.array([0.0, 1.0]), np.array([32, 32]), np.array([1, 1]), hash_ids_flat=np.array([7, 8, 7, 9]),
                  hash_offsets=np.array([0, 2, 4]), hash_block_tokens=16)
    tiled = tile(trace, 4)
    ids = [list(tiled.hash_ids(i)) for i in range(4)]
    assert ids[0][0] == ids[1][0] and ids[2][0] == ids[3][0]  # shared within a copy, as in the original
    assert not set(ids[0] + ids[1]) & set(ids[2] + ids[3])  # never across copies


def fixed_trace(n, prompt, output, rate_qps, seed=0):
    gaps = np.random.default_rng(seed).exponential(1 / rate_qps, n)
    return Trace(np.cumsum(gaps) - gaps[0], np.full(n, prompt), np.full(n, output))


def test_a_short_passing_run_is_run_again_long_enough():
    # 100 requests of 2,048 in / 400 out: at 8 req/s they arrive in ~12 s, one lifetime is several seconds
    piece = search_slice(fixed_trace(100, 2048, 400, 8.0), 100, 0.1)
    point = evaluate_rate(EngineConfig(model="llama-3-8b", hardware="h100-sxm"), piece, 8.0,
                          parse_slo(["ttft_p99=5s", "tpot_p99=0.2s"]))
    steady = point.steady
    assert steady["n_requests"] > 100  # lengthened by tiling the workload
    assert point.passes == (steady["long_enough"] and steady["kept_up"] and point.slo_passes)
    assert steady["long_enough"] and steady["measured_lifetimes"] >= MEASURED_LIFETIMES
