"""Host-memory tier of the radix prefix cache: chain hashes, exact LRU behaviour, an evicted
prefix coming back from host memory at the host-link price instead of a recompute, per-tier hit
rates, off-by-default equality and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import STEP_S, ConstantCost, make_trace
from typer.testing import CliRunner

from sim.cli import app
from sim.engine.kv.host_tier import HostTier, chain_hashes
from sim.inputs.config import EngineConfig
from sim.run.invoke import load_run_workload
from sim.run.simulate import simulate
from sim.run.summary import requests_frame, summarize

MASK = 2**64 - 1


def _sequential_chain(keys) -> list[int]:
    def mix(x: int) -> int:
        x &= MASK
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
        return x ^ (x >> 31)

    out, h = [], 0
    for key in keys:
        h = (h * 0x100000001B3 + mix(int(key) & MASK)) & MASK
        out.append(h)
    return out


def test_chain_hashes_are_the_rolling_hash_and_depend_on_the_whole_prefix():
    keys = np.random.default_rng(0).integers(-(2**62), 2**62, size=300)
    assert chain_hashes(keys).tolist() == _sequential_chain(keys)
    assert chain_hashes(keys[:50]).tolist() == chain_hashes(keys)[:50].tolist()
    # the same key after a different prefix hashes differently (keys do not encode their position)
    a, b = chain_hashes(np.array([1, 2, 3])), chain_hashes(np.array([9, 2, 3]))
    assert not set(a.tolist()) & set(b.tolist())
    assert chain_hashes(np.empty(0, dtype=np.int64)).shape == (0,)


def test_lru_order_exact():
    tier = HostTier(3)
    tier.store(np.array([1, 2, 3], dtype=np.uint64))
    tier.load(np.array([1], dtype=np.uint64))  # 1 becomes most recent: 2 is now the oldest
    tier.store(np.array([4], dtype=np.uint64))
    assert tier.leading_hits(np.array([1, 3, 4], dtype=np.uint64)) == 3
    assert tier.leading_hits(np.array([2, 1], dtype=np.uint64)) == 0
    tier.store(np.array([5, 6], dtype=np.uint64))  # drops 3 then 1
    assert tier.leading_hits(np.array([4, 5, 6], dtype=np.uint64)) == 3
    assert tier.leading_hits(np.array([1], dtype=np.uint64)) == 0
    assert tier.stats() == {"capacity_blocks": 3, "stored_blocks": 6, "dropped_blocks": 3, "loaded_blocks": 1,
                            "held_blocks": 3}


# A's 4-block prompt is cached, then B (unrelated, 8 blocks: the whole cache) evicts all of it;
# C repeats A's prompt after that.
def _evict_then_repeat(cpu_cache_gib: float, swap_s_per_block: float):
    a_ids, b_ids = [1, 2, 3, 4, 5], [20, 21, 22, 23, 24, 25, 26, 27]
    rows = [(0.0, 65, 1), (4 * STEP_S, 113, 1), (8 * STEP_S, 65, 1)]
    trace = make_trace(rows, [a_ids, b_ids, a_ids], hash_block_tokens=16)
    cfg = EngineConfig(policy="radix", num_gpu_blocks_override=8, max_model_len=256, watermark=0.0,
                       cpu_cache_gib=cpu_cache_gib)
    result = simulate(cfg, trace, cost=ConstantCost(swap_s_per_block=swap_s_per_block))
    return result, requests_frame(result)


def test_an_evicted_prefix_comes_back_from_host_memory():
    per_block_s = STEP_S / 8
    _, gpu_only = _evict_then_repeat(0.0, per_block_s)
    result, tiered = _evict_then_repeat(1.0, per_block_s)
    assert gpu_only["cached_tokens"].tolist() == [0, 0, 0]  # A's blocks were evicted for B
    assert tiered["cached_tokens"].tolist() == [0, 0, 64]
    c = tiered.iloc[2]
    # C loads its 4 full prompt blocks over the host link, then prefills its 1 remaining token
    assert c["ttft_s"] == pytest.approx(4 * per_block_s + STEP_S)
    assert c["attr_swap_s"] == pytest.approx(4 * per_block_s)
    assert gpu_only.iloc[2]["ttft_s"] == STEP_S  # a constant-cost recompute takes one step too
    summary = summarize(result, tiered)
    assert summary["prefix_hit_rate_host"] == pytest.approx(64 / (65 + 113 + 65))
    assert summary["prefix_hit_rate_gpu"] == 0.0
    assert result.replicas[0].sched.host_loads.tier.n_loaded == 4


def _cycling_families(cpu_cache_gib: float):
    """30 requests cycling over 5 prompt families of 8 shared blocks (+2 own); the GPU cache
    holds about two families, so a family is evicted before it comes back."""
    rows, ids = [], []
    for i in range(30):
        family = i % 5
        rows.append((i * 4 * STEP_S, 161, 2))
        ids.append([family * 100 + j for j in range(8)] + [1000 + 10 * i + j for j in range(3)])
    trace = make_trace(rows, ids, hash_block_tokens=16)
    cfg = EngineConfig(policy="radix", num_gpu_blocks_override=30, max_model_len=512, cpu_cache_gib=cpu_cache_gib)
    result = simulate(cfg, trace, cost=ConstantCost(swap_s_per_block=STEP_S / 64))
    return result, requests_frame(result)


def test_tier_off_changes_nothing_and_on_raises_hits():
    plain_result, plain = _cycling_families(0.0)
    tiered_result, tiered = _cycling_families(1.0)
    base, with_tier = summarize(plain_result, plain), summarize(tiered_result, tiered)
    assert base["prefix_hit_rate_host"] == 0.0 and base["evicted_blocks"] > 0
    # every family's second and later visits find its 8 shared blocks in host memory
    assert with_tier["prefix_hit_rate_host"] == pytest.approx(25 * 8 * 16 / (30 * 161))
    assert with_tier["prefix_hit_rate"] > base["prefix_hit_rate"]
    assert with_tier["prefix_hit_rate_gpu"] + with_tier["prefix_hit_rate_host"] == pytest.approx(
        with_tier["prefix_hit_rate"])
    again = requests_frame(_cycling_families(1.0)[0])
    assert again.equals(tiered)


def test_tier_off_by_default_equals_plain_radix():
    workload = load_run_workload("mooncake_conversation", rate_scale=0.25, max_requests=80)
    cfg = EngineConfig(policy="radix", model="llama-3.1-8b", num_gpu_blocks_override=3000)
    plain = requests_frame(simulate(cfg, workload))
    zero = requests_frame(simulate(cfg.model_copy(update={"cpu_cache_gib": 0.0}), workload))
    assert plain.equals(zero)


@pytest.mark.parametrize("args", [
    ["--policy", "radix", "--cpu-cache-gib", "-1"],
    ["--policy", "chunked", "--cpu-cache-gib", "8"],
])
def test_bad_tier_input_one_line_exit_2(args):
    result = CliRunner().invoke(app, ["simulate", "--max-requests", "5", *args])
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1


def test_tier_decode_runs_equal_single_steps(monkeypatch):
    from test_engine_decode_runs import check_equivalent

    workload = load_run_workload("mooncake_conversation", rate_scale=0.25, max_requests=100)
    cfg = EngineConfig(policy="radix", max_model_len=131072, num_gpu_blocks_override=4000, cpu_cache_gib=16.0)
    summary = check_equivalent(cfg, workload, monkeypatch)
    assert summary["evicted_blocks"] > 0
