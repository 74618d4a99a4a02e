"""ShareGPT lengths drawn as vLLM's benchmarks draw them (sim.inputs.workload.vllm_sharegpt), the bundled
first-turn tables, and validation's `sharegpt` workload using them."""

from __future__ import annotations

import random

import numpy as np
import pytest

from sim.errors import InputError
from sim.inputs.workload import load_workload
from sim.inputs.workload.vllm_sharegpt import load_table, sample_like_vllm, table_for_model
from sim.validate.cases import Case
from sim.validate.run import cannot_express, predict


def test_sampling_walks_the_seeded_shuffle_and_applies_vllms_filter():
    prompt = np.array([3, 10, 1025, 600, 50, 20, 900, 8])
    reply = np.array([50, 2, 10, 10, 60, 30, 1200, 9])
    valid = {1: False, 0: False, 2: False, 3: True, 4: True, 5: True, 6: False, 7: True}  # <4, <4, >1024, .., >2048
    order = list(range(8))
    random.Random(0).shuffle(order)  # what random.seed(0); random.shuffle(data) does to 8 items
    expected = [i for i in order if valid[i]][:3]
    p, o = sample_like_vllm(prompt, reply, 3, seed=0)
    assert p.tolist() == prompt[expected].tolist() and o.tolist() == reply[expected].tolist()
    fixed_p, fixed_o = sample_like_vllm(prompt, reply, 4, seed=0, fixed_output_len=100)
    assert set(fixed_o.tolist()) == {100} and 10 in fixed_p.tolist()  # reply too short no longer matters
    with pytest.raises(InputError, match="at most 4 valid ShareGPT pairs"):
        sample_like_vllm(prompt, reply, 5)


def test_bundled_first_turn_tables():
    for name in ("sharegpt_bench_llama3", "sharegpt_bench_mistral_v1"):
        prompt, reply = load_table(name)
        assert prompt.size == reply.size == 17_400 and prompt.min() >= 1
        keep = (prompt >= 4) & (reply >= 4) & (prompt <= 1024) & (prompt + reply <= 2048)
        assert 15_000 < keep.sum() < prompt.size
    prompt, reply = load_table("sharegpt_bench_llama3")
    keep = (prompt >= 4) & (reply >= 4) & (prompt <= 1024) & (prompt + reply <= 2048)
    # what workloads/README.md states for the pairs vLLM keeps (Llama-3 tokenizer)
    assert prompt[keep].mean() == pytest.approx(221.1, abs=0.05)
    assert reply[keep].mean() == pytest.approx(198.9, abs=0.05)
    assert len(load_workload("sharegpt_bench", seed=1)) == 17_400


def test_table_follows_the_models_tokenizer():
    assert table_for_model("llama-3.1-8b") == table_for_model("Llama-3-70B") == "sharegpt_bench_llama3"
    assert table_for_model("mixtral-8x7b") == "sharegpt_bench_mistral_v1"
    assert table_for_model("llama-2-7b") is None and table_for_model("qwen2.5-7b") is None


def _case(model: str, n: int = 24) -> Case:
    return Case(case_id="sg", source="test", engine="vllm", model=model, gpu="H100", tp=1, weight_dtype="bf16",
                workload="sharegpt", num_requests=n, metric="request_throughput_req_s", value=10.0,
                engine_args={"policy": "continuous"})


def test_validation_sharegpt_rows_are_expressible_where_a_table_exists():
    assert cannot_express(_case("llama-3.1-8b")) is None
    pred = predict(_case("llama-3.1-8b"))
    assert pred.predicted is not None and pred.predicted > 0 and pred.n_simulated == 24
    assert "ShareGPT" in cannot_express(_case("llama-2-7b"))
