"""The conservation and determinism checks of test_engine_conservation, extended to speculative
decoding, the host-memory prefix tier and disaggregated prefill/decode (seeded random small
traces, caches small enough to preempt, evict and reject); attribution sums to e2e in all of them."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import STEP_S, ConstantCost
from hypothesis import given
from test_engine_conservation import (
    BLOCK_SIZE,
    KNOBS,
    MAX_MODEL_LEN,
    SETTINGS,
    assert_conserved,
    assert_timestamps,
    checked_commit,
    small_traces,
)

from sim.inputs.config import EngineConfig
from sim.run.attribution import PARTS
from sim.run.simulate import simulate
from sim.run.summary import requests_frame

FEATURES = {
    "spec-continuous": {"policy": "continuous", "spec_tokens": 3, "spec_acceptance": [0.9, 0.6, 0.3]},
    "spec-chunked-swap": {"policy": "chunked", "spec_tokens": 2, "spec_acceptance": [0.7], "preemption_mode": "swap"},
    "spec-radix": {"policy": "radix", "spec_tokens": 4, "spec_acceptance": [1.0]},
    "host-tier": {"policy": "radix", "cpu_cache_gib": 1.0},
    "host-tier-swap": {"policy": "radix", "cpu_cache_gib": 1.0, "preemption_mode": "swap", "radix_chunked": False},
    "disagg-1p2d": {"policy": "chunked", "prefill_replicas": 1, "decode_replicas": 2, "kv_transfer_gb_s": 1e-6,
                    "kv_transfer_latency_us": 1000.0},
    "disagg-2p1d-radix": {"policy": "radix", "prefill_replicas": 2, "decode_replicas": 1, "kv_transfer_gb_s": 1e-6,
                          "kv_transfer_latency_us": 0.0, "cpu_cache_gib": 1.0},
    "disagg-spec": {"policy": "continuous", "prefill_replicas": 1, "decode_replicas": 1, "spec_tokens": 2,
                    "spec_acceptance": [0.5], "kv_transfer_gb_s": 1e-6, "kv_transfer_latency_us": 0.0},
}


def run_feature(monkeypatch, trace, knobs, n_blocks, chunk_size, max_num_seqs, seed=0, request_chunk=None):
    chunked = knobs["policy"] == "chunked" or (knobs["policy"] == "radix" and knobs.get("radix_chunked", True))
    # the step's token budget (vLLM V1) and one request's cap in it
    budget = {"max_num_batched_tokens": chunk_size, "chunk_size": request_chunk} if chunked else {}
    cfg = EngineConfig(num_gpu_blocks_override=n_blocks, max_model_len=MAX_MODEL_LEN, block_size=BLOCK_SIZE,
                       max_num_seqs=max_num_seqs, swap_space=0.01, seed=seed, **budget, **knobs)
    problems = checked_commit(monkeypatch, check_tables=True)
    result = simulate(cfg, trace, cost=ConstantCost(swap_s_per_block=STEP_S / 8))
    return result, requests_frame(result), problems


def assert_attribution_sums(frame):
    done = frame[frame["status"] == "FINISHED"]
    parts = done[[f"attr_{p}_s" for p in PARTS]].to_numpy()
    np.testing.assert_allclose(parts.sum(axis=1), done["e2e_s"].to_numpy(), rtol=0, atol=1e-9)
    assert (parts >= -1e-9).all()


@pytest.mark.parametrize("feature", list(FEATURES))
@SETTINGS
@given(trace=small_traces(), **KNOBS)
def test_features_conserve_blocks_and_tokens(monkeypatch, feature, trace, n_blocks, chunk_size, max_num_seqs,
                                             request_chunk):
    result, frame, problems = run_feature(monkeypatch, trace, FEATURES[feature], n_blocks, chunk_size, max_num_seqs,
                                          request_chunk=request_chunk)
    assert_conserved(result, frame, problems)
    assert_timestamps(frame)
    assert_attribution_sums(frame)
    again = run_feature(monkeypatch, trace, FEATURES[feature], n_blocks, chunk_size, max_num_seqs,
                        request_chunk=request_chunk)[1]
    assert again.equals(frame)


def test_the_feature_cases_really_speculate_load_transfer_and_preempt(monkeypatch):
    from conftest import make_trace

    rows = [(i * STEP_S / 4, 150 + 7 * i, 40) for i in range(8)] + [(0.5, 300, 60)]
    ids = [[1, 2, 3] + [100 + 10 * i + j for j in range(7)] for i in range(8)] + [list(range(200, 215))]
    trace = make_trace(rows, ids, hash_block_tokens=BLOCK_SIZE)
    seen = {}
    for feature, knobs in FEATURES.items():
        result, frame, problems = run_feature(monkeypatch, trace, knobs, 24, 32, 256)
        assert problems == []
        seen[feature] = result
    spec = [r.sched.spec for r in seen["spec-chunked-swap"].replicas]
    assert sum(s.n_accepted for s in spec) > 0
    assert seen["spec-chunked-swap"].recorder.preemptions > 0
    assert seen["host-tier"].replicas[0].sched.host_loads.tier.n_stored > 0
    assert seen["disagg-1p2d"].disagg.coordinator.n_transfers > 0
    assert (requests_frame(seen["disagg-1p2d"])["status"] == "REJECTED").sum() >= 1  # the 300-token prompt
