"""Latency attribution: the parts add up to e2e for every finished request (every policy, with
preemption by recompute and swap, radix hits), and a hand-checkable two-request scenario shows
why chunked prefill spares a decoding request the wait that continuous batching imposes."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import STEP_S, ConstantCost, make_trace

from sim.inputs.config import EngineConfig
from sim.run.attribution import PARTS
from sim.run.invoke import load_run_workload
from sim.run.simulate import simulate
from sim.run.summary import requests_frame, summarize

SUM_ATOL_S = 1e-9
COLUMNS = [f"attr_{name}_s" for name in PARTS]


class TokenCost(ConstantCost):
    """A step costs `base_s + per_token_s * tokens`: prefill tokens make steps longer."""

    def __init__(self, base_s: float, per_token_s: float):
        super().__init__(base_s)
        self.per_token_s = per_token_s

    def step_time_s(self, new_tokens, cached_tokens, n_sampled, verify_tokens=1):
        return self.step_s + self.per_token_s * float(np.sum(new_tokens))

    def decode_run_times_s(self, contexts, n_steps):
        return np.full(n_steps, self.step_s + self.per_token_s * len(contexts))


@pytest.fixture(scope="module")
def slice_():
    return load_run_workload("splitwise_conv", rate_scale=4, max_requests=200)


@pytest.fixture(scope="module")
def mooncake():
    return load_run_workload("mooncake_conversation", rate_scale=0.25, max_requests=80)


def assert_parts_sum_to_e2e(frame):
    done = frame[frame["status"] == "FINISHED"]
    assert len(done) > 0
    parts = done[COLUMNS].to_numpy()
    assert (parts >= -SUM_ATOL_S).all(), "a part went negative"
    np.testing.assert_allclose(parts.sum(axis=1), done["e2e_s"].to_numpy(), rtol=0, atol=SUM_ATOL_S)
    assert frame.loc[frame["status"] != "FINISHED", COLUMNS].isna().all().all()


@pytest.mark.parametrize("knobs", [
    {"policy": "continuous"},
    {"policy": "chunked"},
    {"policy": "static", "max_model_len": 4096},
    {"policy": "continuous", "num_gpu_blocks_override": 400, "preemption_mode": "swap"},
    {"policy": "chunked", "num_gpu_blocks_override": 400},
])
def test_parts_sum_to_e2e(slice_, knobs):
    result = simulate(EngineConfig(**knobs), slice_)
    frame = requests_frame(result)
    assert_parts_sum_to_e2e(frame)
    if "num_gpu_blocks_override" in knobs:
        assert result.recorder.preemptions > 0
        done = frame[frame["status"] == "FINISHED"]
        assert done["attr_preempted_s"].sum() > 0
        kind = "attr_swap_s" if knobs.get("preemption_mode") == "swap" else "attr_recompute_s"
        assert done[kind].sum() > 0


@pytest.mark.parametrize("knobs", [
    {"policy": "continuous", "num_gpu_blocks_override": 400, "preemption_mode": "swap"},
    {"policy": "chunked", "num_gpu_blocks_override": 400, "max_num_batched_tokens": 512},
    {"policy": "chunked", "prefill_replicas": 1, "decode_replicas": 1},
])
def test_few_row_plans_are_accounted_as_the_array_path_does(slice_, knobs, monkeypatch):
    """The one-pass Python accounting of small plans gives the array path's parts exactly."""
    import sim.run.attribution as attribution

    def parts(max_rows: int):
        monkeypatch.setattr(attribution, "SCALAR_MAX_ROWS", max_rows)
        return requests_frame(simulate(EngineConfig(**knobs), slice_, core="engine"))[COLUMNS].to_numpy()

    scalar, arrays = parts(10**9), parts(-1)
    assert np.isfinite(scalar).sum() > 0
    np.testing.assert_array_equal(scalar, arrays)


def test_radix_parts_sum_and_hits_shorten_prefill(mooncake):
    frame = requests_frame(simulate(EngineConfig(policy="radix", num_gpu_blocks_override=3000), mooncake))
    assert_parts_sum_to_e2e(frame)
    assert frame["cached_tokens"].sum() > 0


def test_summary_names_p50_and_p99_requests(slice_):
    result = simulate(EngineConfig(policy="chunked"), slice_)
    frame = requests_frame(result)
    attribution = summarize(result, frame)["latency_attribution"]
    done = frame[frame["status"] == "FINISHED"].set_index("request_id")
    for label in ("p50", "p99"):
        row = done.loc[attribution[f"{label}_request_id"]]
        assert attribution[f"{label}_e2e_s"] == row["e2e_s"]
        total = sum(attribution[f"{label}_{name}_s"] for name in PARTS)
        assert total == pytest.approx(row["e2e_s"], abs=SUM_ATOL_S)
    assert attribution["p99_e2e_s"] >= attribution["p50_e2e_s"]


def _two_requests(policy: str):
    """A (32-token prompt, 3 output tokens) at 0; B (32, 2) at half a step. Steps cost
    base + per_token x tokens, base = STEP_S, per_token = STEP_S / 32."""
    trace = make_trace([(0.0, 32, 3), (STEP_S / 2, 32, 2)])
    cfg = EngineConfig(policy=policy, max_num_batched_tokens=512, max_model_len=256)
    frame = requests_frame(simulate(cfg, trace, cost=TokenCost(STEP_S, STEP_S / 32)))
    return frame.set_index("request_id")[COLUMNS + ["e2e_s"]]


def test_continuous_makes_a_decode_wait_for_a_prefill():
    base, tok = STEP_S, STEP_S / 32
    prefill_s, decode_s = base + 32 * tok, base + tok
    a, b = (row for _, row in _two_requests("continuous").iterrows())
    # A: prefill [0, P]; sits out B's prefill [P, 2P]; decodes with B (base + 2 tok), then alone
    assert a["attr_prefill_s"] == prefill_s
    assert a["attr_interference_s"] == prefill_s
    assert a["attr_decode_s"] == pytest.approx(base + 2 * tok + decode_s)
    assert b["attr_queue_s"] == prefill_s - STEP_S / 2
    assert b["attr_prefill_s"] == prefill_s
    assert b["attr_decode_s"] == pytest.approx(base + 2 * tok)
    assert a[COLUMNS].sum() == pytest.approx(a["e2e_s"], abs=1e-12)


def test_chunked_shares_the_step_and_names_the_interference():
    base, tok = STEP_S, STEP_S / 32
    a, b = (row for _, row in _two_requests("chunked").iterrows())
    # step 2 = A's decode + B's whole prompt (base + 33 tok): A owns a decode-only step (base + tok),
    # the rest is B's prefill and counts as interference for A
    assert a["attr_interference_s"] == pytest.approx(32 * tok)
    assert a["attr_prefill_s"] == base + 32 * tok
    assert b["attr_prefill_s"] == pytest.approx(32 * tok)
    assert b["attr_interference_s"] == pytest.approx(base + tok)
    for _, row in (("a", a), ("b", b)):
        assert row[COLUMNS].sum() == pytest.approx(row["e2e_s"], abs=1e-12)
