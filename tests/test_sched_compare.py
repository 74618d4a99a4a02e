"""The policies side by side on a loaded slice of the Splitwise conversation trace (first 300 requests
sped up 8x, Llama-3-8B on one H100): what each policy is for must show in the numbers.
Measured when written: static 7.5 req/s, mean TTFT 10.0 s, KV fragmentation 0.84; continuous
15.8 req/s, 0.14 s, 0.008, p99 ITL 282 ms; chunked p99 ITL 22 ms."""

from __future__ import annotations

import pytest

from sim.inputs.config import EngineConfig
from sim.run.invoke import load_run_workload
from sim.run.simulate import simulate
from sim.run.summary import summarize


@pytest.fixture(scope="module")
def summaries() -> dict[str, dict]:
    workload = load_run_workload("splitwise_conv", rate_scale=8, max_requests=300)
    # chunked with a Sarathi-sized step budget of 512 tokens (max_num_batched_tokens; the default 8192
    # would let whole prompts through and leave little to interleave)
    budget = {"chunked": {"max_num_batched_tokens": 512}}
    return {policy: summarize(simulate(EngineConfig(policy=policy, **budget.get(policy, {})), workload))
            for policy in ("static", "continuous", "chunked")}


def test_everyone_finishes(summaries):
    assert all(s["n_finished"] == 300 for s in summaries.values())


def test_static_wastes_most_of_its_reserved_kv(summaries):
    # static reserves max_model_len (8192 tokens) per request; conversations use a small share of it
    static, continuous = summaries["static"]["kv_fragmentation"], summaries["continuous"]["kv_fragmentation"]
    assert static > 0.5
    assert static > 20 * continuous


def test_continuous_beats_static_on_throughput_and_mean_ttft(summaries):
    static, continuous = summaries["static"], summaries["continuous"]
    assert continuous["request_throughput"] > 1.5 * static["request_throughput"]
    assert continuous["output_throughput_tok_s"] > 1.5 * static["output_throughput_tok_s"]
    assert continuous["ttft_s"]["mean"] < static["ttft_s"]["mean"] / 10


def test_chunked_prefill_cuts_p99_inter_token_latency(summaries):
    # continuous stalls every decode for whole prefills; chunked interleaves bounded chunks
    assert summaries["chunked"]["itl_s"]["p99"] < summaries["continuous"]["itl_s"]["p99"] / 3
