"""sglang@0.5 (SGLang v0.5.6) and trtllm@1.2 (TensorRT-LLM 1.2, PyTorch backend): the defaults read from the
engines' source, the bare family names pointing at them, and the tokenizer in front of the engine core
(one process, first come first served: a burst's TTFT grows with the serialised tokenisation)."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from sim.engine.frontend import tokenized_arrivals_s
from sim.errors import InputError
from sim.inputs.config import EngineConfig
from sim.inputs.engines import EngineOverhead, load_engine
from sim.inputs.engines.apply import effective_settings
from sim.inputs.workload.trace import Trace
from sim.run.attribution import PARTS
from sim.run.simulate import simulate
from sim.run.summary import requests_frame, summarize


def test_the_new_versions_are_the_defaults_and_the_old_ones_stay_selectable():
    assert load_engine("sglang").name == "sglang@0.5" and load_engine("sglang").version == "0.5.6"
    assert load_engine("trtllm").name == "trtllm@1.2" and load_engine("trtllm").version.startswith("1.2")
    assert load_engine("sglang@0.4").version == "0.4.x"
    assert load_engine("trtllm@1.0").version.startswith("1.0")


def test_sglang_defaults_equal_v056_server_args():
    """server_args.py: max_prefill_tokens 16384, schedule_policy fcfs, overlap on; chunk 8192 / graphs up to
    256 (TP<4) or 512 on 80-160 GiB GPUs; chunk 16384 / graphs up to 512 above; chunk // dp under DP attention."""
    preset = load_engine("sglang@0.5")
    assert preset.scheduling.max_num_batched_tokens == 16384
    assert preset.scheduling.radix_ordering == "fcfs"
    assert preset.overhead.overlap and preset.overhead.async_scheduling
    h100 = EngineConfig(engine="sglang", model="llama-3-8b", hardware="h100-sxm")
    b200 = EngineConfig(engine="sglang", model="llama-3-8b", hardware="b200")
    assert (h100.chunk_size, b200.chunk_size) == (8192, 16384)
    assert EngineConfig(engine="sglang", model="llama-3-8b", hardware="l40s").chunk_size == 4096
    assert EngineOverhead.for_run(preset, h100).capture_sizes[-1] == 256
    tp4 = EngineConfig(engine="sglang", model="llama-3-70b", hardware="h200", tp=4)
    assert EngineOverhead.for_run(preset, tp4).capture_sizes[-1] == 512
    assert EngineOverhead.for_run(preset, h100).capture_sizes[:6] == (1, 2, 4, 8, 12, 16)
    assert EngineConfig(engine="sglang", model="llama-3-8b", hardware="h100-sxm", chunk_size=1024).chunk_size == 1024


def test_sglang_dp_attention_divides_the_chunk_over_the_ranks():
    cfg = EngineConfig(engine="sglang", model="deepseek-v3", hardware="h200", tp=8, dp=8, ep=8,
                       enable_dp_attention=True, weight_dtype="fp8")
    assert cfg.chunk_size == 8192 // 8


def test_trtllm_defaults_equal_the_llm_api_source():
    """llm_args.py: max_batch_size 2048, max_num_tokens 8192, GUARANTEED_NO_EVICT, overlap on, CudaGraphConfig()
    = sizes 1..31, 32, 64, 128 without padding, attention-DP balancing off (timeout 50, wait 10)."""
    preset = load_engine("trtllm@1.2")
    s = preset.scheduling
    assert (s.max_num_seqs, s.max_num_batched_tokens, s.kv_admission) == (2048, 8192, "reserve_full")
    assert preset.overhead.async_scheduling
    assert preset.attention_dp_balance.model_dump() == {"enable_balance": False, "timeout_iters": 50,
                                                         "batching_wait_iters": 10}
    over = EngineOverhead.for_run(preset, EngineConfig(engine="trtllm", model="llama-3-8b"))
    assert over.capture_sizes == tuple(range(1, 32)) + (32, 64, 128)
    assert over.padded_size(33) == 33 and not over.graphed(33, True) and over.graphed(32, True)


def _trtllm_adp(tmp_path, enable_balance: bool, **balance) -> str:
    data = load_engine("trtllm@1.2").model_dump()
    data["attention_dp_balance"].update(enable_balance=enable_balance, **balance)
    path = tmp_path / f"adp_{enable_balance}_{len(list(tmp_path.iterdir()))}.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_the_adp_balancer_follows_the_engine_counters():
    """py_executor.py _balance_adp_requests: hold while some rank lacks a context request (every rank decoding)
    until timeout_iters; release at once when some rank has no generation request; batching wait when all have."""
    from types import SimpleNamespace

    from sim.engine.adp_balance import AdpBalancer

    def rank(ctx: bool, gen: bool):
        running = [0] if gen else []
        return SimpleNamespace(running=running, waiting=[1] if ctx else [], cfg=SimpleNamespace(max_num_seqs=8),
                               split_decoding=lambda rows: (rows, []))

    balancer = AdpBalancer(timeout_iters=3, batching_wait_iters=1)
    lopsided = [rank(True, True), rank(False, True)]
    assert [balancer.hold(lopsided) for _ in range(3)] == [True, True, False]  # released at the timeout
    assert balancer.hold([rank(True, True), rank(False, False)]) is False  # a rank without generation work
    both = [rank(True, True), rank(True, True)]
    assert [balancer.hold(both), balancer.hold(both)] == [True, False]  # one batching wait, then go


def test_adp_balancing_makes_context_requests_wait_for_every_rank(tmp_path):
    """Moderate Poisson load on 4 attention-DP ranks that are all decoding: with balancing on, a context
    request waits until every rank has one (or timeout_iters), so TTFT grows; TPOT barely moves."""
    rng = np.random.default_rng(0)
    n = 40
    trace = Trace(np.cumsum(rng.exponential(0.25, n)), np.full(n, 512), np.full(n, 256))
    layout = dict(model="qwen3-30b-a3b", hardware="h100-sxm", tp=4, dp=4, ep=4, enable_dp_attention=True,
                  moe_a2a_backend="allgather_reducescatter")
    out = {}
    for on in (False, True):
        cfg = EngineConfig(engine=_trtllm_adp(tmp_path, on, timeout_iters=50, batching_wait_iters=0), **layout)
        out[on] = summarize(simulate(cfg, trace))
    assert out[True]["ttft_s"]["mean"] > 1.5 * out[False]["ttft_s"]["mean"]
    assert out[True]["tpot_s"]["mean"] == pytest.approx(out[False]["tpot_s"]["mean"], rel=0.1)
    continuous = EngineConfig(engine=_trtllm_adp(tmp_path, True), policy="continuous", **layout)
    with pytest.raises(InputError, match="chunked"):
        simulate(continuous, trace)


def test_the_preset_version_is_reported():
    settings = effective_settings(EngineConfig(engine="sglang", model="llama-3-8b"))
    assert settings["engine"] == "sglang@0.5" and settings["engine_version"] == "SGLang 0.5.6"
    assert settings["overhead"]["tokenize_us_per_token"] == pytest.approx(1.1)
    assert effective_settings(EngineConfig(engine="trtllm", model="llama-3-8b"))["engine"] == "trtllm@1.2"


def test_one_tokenizer_serves_first_come_first_served():
    done = tokenized_arrivals_s(np.array([0.0, 0.0, 0.0, 10.0]), np.array([1000, 2000, 1000, 1000]), 1e-6)
    np.testing.assert_allclose(done, [0.001, 0.003, 0.004, 10.001])


def _with_tokenizer(tmp_path, us_per_token: float) -> str:
    data = load_engine("sglang@0.5").model_dump()
    data["overhead"]["tokenize_us_per_token"] = us_per_token
    path = tmp_path / f"sglang_{us_per_token}.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_a_burst_waits_for_the_serialised_tokenizer_and_the_breakdown_says_so(tmp_path):
    n, prompt = 32, 8000
    burst = Trace(np.zeros(n), np.full(n, prompt), np.full(n, 8))
    out = {}
    for us in (0.0, 1.1):
        cfg = EngineConfig(engine=_with_tokenizer(tmp_path, us), model="llama-3-8b", latency_attribution=True)
        result = simulate(cfg, burst)
        out[us] = (summarize(result), requests_frame(result))
    frame = out[1.1][1].sort_values("request_id")
    tokenize = frame["attr_tokenize_s"].to_numpy()
    # request i leaves the one tokenizer after i + 1 prompts: 8.8 ms each
    np.testing.assert_allclose(tokenize, (np.arange(n) + 1) * prompt * 1.1e-6, rtol=1e-9)
    assert out[1.1][0]["ttft_s"]["mean"] > out[0.0][0]["ttft_s"]["mean"]
    np.testing.assert_allclose(frame[[f"attr_{p}_s" for p in PARTS]].sum(axis=1), frame["e2e_s"], atol=1e-9)
    assert (out[0.0][1]["attr_tokenize_s"] == 0).all()
    np.testing.assert_array_equal(out[1.1][1]["arrival_s"], out[0.0][1]["arrival_s"])  # the client's times


def test_validation_rows_take_the_preset_of_their_version():
    """Measured rows keep the engine version they were measured on: the perf-overview tables (trtllm-bench,
    0.19 - 1.0) stay on trtllm@1.0; rows of SGLang 0.5.6 / TensorRT-LLM 1.2.0rc2 take the new presets."""
    from sim.validate.names import engine_for_version

    assert engine_for_version("trtllm", "0.19.0") == engine_for_version("trtllm", "1.0") == "trtllm@1.0"
    assert engine_for_version("trtllm", "") == "trtllm@1.0" and engine_for_version("sglang", "") == "sglang@0.4"
    assert engine_for_version("trtllm", "nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc2") == "trtllm@1.2"
    assert engine_for_version("sglang", "lmsysorg/sglang:v0.5.6-cu129-amd64") == "sglang@0.5"
    assert engine_for_version("vllm", "vllm/vllm-openai:v0.13.0") == "vllm@0.15"
    assert engine_for_version("vllm@0.6", "0.6.x") == "vllm@0.6"


def test_sglang_mem_fraction_static_follows_its_formula():
    """(GPU MiB - reserved) / GPU MiB: H100 TP1 reserves 8192 x 1.5 + 256 x 2 + 128 = 12928 MiB of 81559;
    H200 TP8 DP-attention 8 reserves 12288 + 1024 + 1024 + 512 x 8 x 3 + 512 x 8 x 1.5 = 32768 MiB of 143770."""
    h100 = EngineConfig(engine="sglang", model="llama-3-8b", hardware="h100-sxm")
    assert h100.gpu_memory_utilization == round((79.65 * 1024 - 12928) / (79.65 * 1024), 3) == 0.841
    dpa = EngineConfig(engine="sglang", model="deepseek-v3", hardware="h200", tp=8, dp=8, ep=8,
                       enable_dp_attention=True, weight_dtype="fp8")
    assert dpa.gpu_memory_utilization == round((140.4 * 1024 - 32768) / (140.4 * 1024), 3)
    assert EngineConfig(engine="sglang", model="llama-3-8b", gpu_memory_utilization=0.8).gpu_memory_utilization == 0.8


def test_sglang_pool_holds_weights_and_kv_only():
    """kv_pool static_share: the KV budget is HBM x fraction - runtime - weights; the activations are
    already outside the fraction (model_runner.py profile_max_num_token), so not taken again."""
    from sim.inputs.hardware import load_hardware
    from sim.inputs.layout.memory import plan_memory
    from sim.inputs.model import load_model

    model, hw = load_model("llama-3-8b"), load_hardware("h100-sxm")
    inside = plan_memory(model, hw, 1, 16, 0.841, max_num_batched_tokens=16384, max_num_seqs=2048)
    outside = plan_memory(model, hw, 1, 16, 0.841, max_num_batched_tokens=16384, max_num_seqs=2048,
                          activations_outside=True)
    per_block = 16 * 2 * 32 * 8 * 128 * 2  # K and V, 32 layers, 8 KV heads x 128, bf16
    gained = outside.num_gpu_blocks - inside.num_gpu_blocks
    assert inside.activation_reserve_bytes_per_gpu > 0
    assert abs(gained - inside.activation_reserve_bytes_per_gpu / per_block) <= 1
