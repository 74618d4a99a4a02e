"""Determinism, rejection of requests that can never fit, and closed-loop arrivals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import STEP_S, ConstantCost, make_trace

from sim.errors import InputError
from sim.inputs.config import EngineConfig
from sim.inputs.workload.trace import ClosedLoop
from sim.run.invoke import load_run_workload
from sim.run.simulate import simulate
from sim.run.summary import requests_frame


@pytest.fixture(scope="module")
def splitwise_slice():
    return load_run_workload("splitwise_conv", rate_scale=4, max_requests=120)


# ---- determinism ------------------------------------------------------------------------------

@pytest.mark.parametrize("policy", ["static", "continuous", "chunked", "radix"])
def test_same_config_and_seed_give_identical_frames(splitwise_slice, policy):
    cfg = EngineConfig(policy=policy, replicas=2, router="random", num_gpu_blocks_override=1100, seed=7,
                       max_model_len=4096, record_steps=True)
    first, second = simulate(cfg, splitwise_slice), simulate(cfg, splitwise_slice)
    pd.testing.assert_frame_equal(requests_frame(first), requests_frame(second), check_exact=True)
    pd.testing.assert_frame_equal(first.recorder.steps_frame(), second.recorder.steps_frame(), check_exact=True)


def test_random_router_follows_the_seed(splitwise_slice):
    def replicas(seed: int) -> np.ndarray:
        cfg = EngineConfig(replicas=3, router="random", seed=seed)
        return requests_frame(simulate(cfg, splitwise_slice))["replica"].to_numpy()

    seed_0 = replicas(0)
    assert (seed_0 == replicas(0)).all()
    assert set(seed_0.tolist()) == {0, 1, 2}
    assert (seed_0 != replicas(1)).any()
    expected = np.random.default_rng(0).integers(3, size=len(seed_0))  # the router draws one int per request
    assert (seed_0 == expected).all()


# ---- requests that can never fit ----------------------------------------------------------------

@pytest.mark.parametrize("policy", ["continuous", "chunked", "radix"])
def test_prompt_larger_than_the_cache_or_context_is_rejected(policy):
    # 10 blocks of 16 = 160 tokens of cache; max_model_len 400.
    trace = make_trace([(0.0, 40, 5), (0.0, 200, 5), (STEP_S, 400, 5), (STEP_S, 450, 5), (2 * STEP_S, 30, 5)])
    cfg = EngineConfig(policy=policy, num_gpu_blocks_override=10, max_model_len=400, watermark=0.0)
    frame = requests_frame(simulate(cfg, trace, cost=ConstantCost()))
    assert frame["status"].tolist() == ["FINISHED", "REJECTED", "REJECTED", "REJECTED", "FINISHED"]
    reasons = frame["reject_reason"]
    assert "KV blocks" in reasons[1] and "cache holds 10" in reasons[1]
    assert "max_model_len=400" in reasons[2] and "max_model_len=400" in reasons[3]
    assert frame.loc[1, "finish_s"] == 0.0  # rejected on arrival, never scheduled
    assert frame.loc[[1, 2, 3], "first_token_s"].isna().all()


def test_prompt_and_output_that_outgrow_the_cache_together_are_rejected():
    # prompt 150 fits 10 blocks, but 150 + 20 output tokens need 11: it could never finish.
    trace = make_trace([(0.0, 150, 20), (0.0, 150, 10)])
    frame = requests_frame(simulate(EngineConfig(num_gpu_blocks_override=10, watermark=0.0), trace,
                                    cost=ConstantCost()))
    assert frame["status"].tolist() == ["REJECTED", "FINISHED"]


def test_static_rejects_prompts_at_max_model_len_and_refuses_a_cache_below_one_reservation():
    trace = make_trace([(0.0, 160, 5), (0.0, 100, 5)])
    frame = requests_frame(simulate(EngineConfig(policy="static", num_gpu_blocks_override=10, max_model_len=160),
                                    trace, cost=ConstantCost()))
    assert frame["status"].tolist() == ["REJECTED", "FINISHED"]
    assert "max_model_len=160" in frame["reject_reason"][0]
    with pytest.raises(InputError, match="max_model_len"):
        simulate(EngineConfig(policy="static", num_gpu_blocks_override=10, max_model_len=400), trace,
                 cost=ConstantCost())


# ---- closed loop --------------------------------------------------------------------------------

def in_flight_after(frame: pd.DataFrame, moments: np.ndarray) -> np.ndarray:
    """Requests in flight just after each moment (everything at that instant applied)."""
    arrivals = np.sort(frame["arrival_s"].to_numpy())
    finishes = np.sort(frame["finish_s"].to_numpy())
    return np.searchsorted(arrivals, moments, side="right") - np.searchsorted(finishes, moments, side="right")


def in_flight_at_arrivals(frame: pd.DataFrame) -> np.ndarray:
    return in_flight_after(frame, np.sort(frame["arrival_s"].to_numpy()))


def closed_pool(n: int) -> object:
    rng = np.random.default_rng(3)
    rows = [(0.0, int(p), int(o)) for p, o in zip(rng.integers(20, 300, n), rng.integers(1, 40, n))]
    rows[5] = (0.0, 5000, 4)  # can never fit: rejected, and its client moves on
    return make_trace(rows)


@pytest.mark.parametrize("policy", ["static", "continuous", "chunked", "radix"])
def test_closed_loop_keeps_exactly_concurrency_requests_in_flight(policy):
    pool = closed_pool(40)
    cfg = EngineConfig(policy=policy, num_gpu_blocks_override=64, max_model_len=512, max_num_seqs=8)
    frame = requests_frame(simulate(cfg, ClosedLoop(pool, concurrency=3), cost=ConstantCost()))
    assert set(frame["status"]) == {"FINISHED", "REJECTED"} and (frame["status"] == "REJECTED").sum() == 1
    counts = in_flight_at_arrivals(frame)
    assert (counts == 3).all()  # every send happens while the pool lasts: exactly C in flight
    last_send_s = frame["arrival_s"].max()
    ends = frame["finish_s"].to_numpy()
    assert (in_flight_after(frame, ends[ends < last_send_s]) == 3).all()  # no end leaves a seat empty
    assert (np.diff(in_flight_after(frame, np.sort(ends[ends >= last_send_s]))) <= 0).all()  # then drains
    arrivals = np.sort(frame["arrival_s"].to_numpy())
    assert (arrivals[:3] == 0.0).all() and (arrivals[3:] > 0.0).all()
    # each later send is some request's end: the client that just finished sends at once
    assert np.isin(arrivals[3:], frame["finish_s"].to_numpy()).all()


def test_closed_loop_with_think_time_has_at_most_concurrency_in_flight():
    pool = closed_pool(30)
    think_s = 3 * STEP_S
    cfg = EngineConfig(policy="continuous", num_gpu_blocks_override=64, max_model_len=512)
    frame = requests_frame(simulate(cfg, ClosedLoop(pool, concurrency=4, think_time_s=think_s),
                                    cost=ConstantCost()))
    counts = in_flight_at_arrivals(frame)
    assert counts.max() <= 4 and counts.min() >= 1
    assert (counts < 4).any()  # thinking clients leave gaps
    arrivals = np.sort(frame["arrival_s"].to_numpy())
    assert np.isin(arrivals[4:], frame["finish_s"].to_numpy() + think_s).all()
    assert (frame["status"] != "PENDING").all() and len(frame) == 30
