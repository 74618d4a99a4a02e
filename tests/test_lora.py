"""Multi-LoRA serving (docs/lora.md): adapter workloads, vLLM's max_loras / slots / loads, outputs."""

from __future__ import annotations

import numpy as np
import pytest

from sim.cost.lora import LoraStepCost
from sim.engine.lora import AdapterSlots
from sim.errors import InputError
from sim.inputs.config import EngineConfig, load_config
from sim.inputs.workload.canonical import write_canonical_jsonl
from sim.inputs.workload.load import load_workload
from sim.inputs.workload.spec import read_spec
from sim.inputs.workload.spec_models import Synthetic
from sim.inputs.workload.synthetic.adapters import popularity_weights
from sim.inputs.workload.synthetic.generate import generate_synthetic
from sim.run.simulate import simulate
from sim.run.summary import requests_columns, summarize

MODEL, HW = "llama-3.1-8b", "h100-sxm"


def _spec(n_requests=160, rate_qps=6.0, adapters=None, **extra):
    data = {"arrival": {"kind": "poisson", "rate_qps": rate_qps},
            "lengths": {"prompt": {"kind": "fixed", "value": 256},
                        "output": {"kind": "uniform", "low": 32, "high": 160}},
            "n_requests": n_requests, **extra}
    if adapters is not False:
        data["adapters"] = adapters or {"n_adapters": 100, "popularity": "zipf", "zipf_s": 1.0}
    return Synthetic.model_validate(data)


def _cfg(**lora) -> EngineConfig:
    return EngineConfig(model=MODEL, hardware=HW, engine="vllm", policy="chunked", **lora)


def _run(trace, **lora):
    result = simulate(_cfg(**lora), trace)
    return result, summarize(result)


@pytest.fixture(scope="module")
def zipf_trace():
    return generate_synthetic(_spec(), 0)


# ---------------------------------------------------------------- workloads
def test_zipf_adapters_follow_their_weights_and_keep_the_other_draws():
    with_adapters = generate_synthetic(_spec(n_requests=4000, rate_qps=50.0), 3)
    without = generate_synthetic(_spec(n_requests=4000, rate_qps=50.0, adapters=False), 3)
    assert np.array_equal(with_adapters.arrival_s, without.arrival_s)  # adapters draw from their own stream
    assert np.array_equal(with_adapters.output_tokens, without.output_tokens)
    counts = np.bincount(with_adapters.extra["adapter"], minlength=100) / 4000
    weights = popularity_weights(_spec().adapters)
    assert weights[0] / weights[1] == pytest.approx(2.0)  # k^-1
    assert abs(counts[0] - weights[0]) < 0.03 and counts[0] > 3 * counts[9]
    assert set(with_adapters.extra["adapter_rank"].tolist()) == {16}


def test_uniform_ranks_and_base_share():
    spec = _spec(n_requests=2000, rate_qps=50.0, adapters={"n_adapters": 4, "popularity": "uniform",
                                                            "ranks": [8, 16, 32, 64], "base_share": 0.25})
    trace = generate_synthetic(spec, 1)
    adapter, rank = trace.extra["adapter"], trace.extra["adapter_rank"]
    assert 0.2 < (adapter == -1).mean() < 0.3 and set(rank[adapter == -1].tolist()) == {0}
    assert all(set(rank[adapter == k].tolist()) == {r} for k, r in enumerate([8, 16, 32, 64]))


def test_bad_adapter_fields_are_one_line(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("synthetic:\n  arrival: {kind: poisson, rate_qps: 1}\n  lengths: {prompt: {kind: fixed, value: 8},"
                    " output: {kind: fixed, value: 8}}\n  n_requests: 5\n  adapters: {n_adapters: 2, ranks: [16]}\n")
    with pytest.raises(InputError) as error:
        read_spec(path)
    assert "ranks" in str(error.value) and "\n" not in str(error.value)


def test_canonical_jsonl_carries_adapters(tmp_path, zipf_trace):
    path = tmp_path / "t.jsonl"
    write_canonical_jsonl(zipf_trace, path)
    back = load_workload(str(path), "canonical")
    assert np.array_equal(back.extra["adapter"], zipf_trace.extra["adapter"])
    assert np.array_equal(back.extra["adapter_rank"], zipf_trace.extra["adapter_rank"])


# ---------------------------------------------------------------- config
@pytest.mark.parametrize("overrides, words", [
    ({"engine": "sglang", "enable_lora": True}, "not modelled yet"),
    ({"enable_lora": True, "max_loras": 4, "max_cpu_loras": 2}, "max_cpu_loras"),
    ({"max_loras": 4}, "enable_lora"),
    ({"enable_lora": True, "policy": "static"}, "policy"),
    ({"enable_lora": True, "model": "mixtral-8x7b"}, "MoE"),
    ({"enable_lora": True, "preemption_mode": "swap"}, "swap"),
])
def test_refused_in_one_line(overrides, words):
    with pytest.raises(InputError) as error:
        load_config(None, {"model": MODEL, "engine": "vllm", "policy": "chunked", **overrides})
    assert words in str(error.value) and "\n" not in str(error.value)


def test_config_without_lora_dumps_as_before():
    assert not any("lora" in key for key in EngineConfig().model_dump())
    on = _cfg(enable_lora=True, max_loras=4).model_dump()
    assert on["max_loras"] == 4 and EngineConfig.model_validate(on).max_loras == 4


# ---------------------------------------------------------------- engine
def test_slots_lru_evicts_only_unused_and_host_cache_saves_the_disk():
    slots = AdapterSlots(2, 3, lambda r: 1e6, lambda r: 1e6, host_link_bytes_s=1e9, disk_bytes_s=1e8)
    assert slots.admit(0, 16) == pytest.approx(1e-3 + 1e-2)  # disk then host link
    slots.join(0)
    slots.admit(1, 16)
    slots.join(1)
    assert not slots.admissible(2) and slots.admissible(1)
    slots.leave(1)
    slots.admit(2, 16)  # evicts 1 (unused), not 0 (in use)
    assert list(slots.gpu) == [0, 2]
    assert slots.admit(1, 16) == pytest.approx(1e-3)  # still in the host cache: the host link only
    assert list(slots.gpu) == [0, 1] and slots.n_host_loads == 1 and slots.n_disk_loads == 3


def test_host_cache_hit_costs_only_the_host_link():
    slots = AdapterSlots(1, 2, lambda r: 1e6, lambda r: 1e6, host_link_bytes_s=1e9, disk_bytes_s=1e8)
    slots.admit(0, 16)
    slots.admit(1, 16)  # 0 evicted from the GPU, still on the host
    assert slots.admit(0, 16) == pytest.approx(1e-3) and slots.n_host_loads == 1


def test_lora_kernels_grow_with_adapters_and_tokens():
    result = simulate(_cfg(enable_lora=True), generate_synthetic(_spec(n_requests=2), 0))
    cost = LoraStepCost(result.replicas[0].sched.cost, 16, 1)
    assert 0 < cost.step_s(8, 1) < cost.step_s(8, 8) < cost.step_s(4096, 8)
    assert cost.step_s(64, 0) == 0.0


def test_zipf_100_adapters_loads_and_slower_ttft_than_without(zipf_trace):
    base, base_summary = _run(zipf_trace)
    lora, lora_summary = _run(zipf_trace, enable_lora=True, max_loras=4)
    facts = lora_summary["lora"]
    assert facts["loads"] > 0 and facts["loads_per_s"] > 0 and 0 < facts["load_time_share"] < 1
    assert 0 < facts["gpu_hit_rate"] < 1
    assert lora_summary["ttft_ms"]["mean"] > base_summary["ttft_ms"]["mean"]
    assert lora_summary["tpot_ms"]["mean"] > base_summary["tpot_ms"]["mean"]  # the LoRA kernels
    assert lora.num_gpu_blocks < base.num_gpu_blocks  # the slots come out of the KV cache
    assert "lora" not in base_summary


def test_more_slots_wait_less(zipf_trace):
    waits = {}
    for max_loras in (1, 16):
        result, summary = _run(zipf_trace, enable_lora=True, max_loras=max_loras)
        waits[max_loras] = float(np.asarray(requests_columns(result)["adapter_wait_s"]).mean())
    assert waits[1] > waits[16] >= 0 and waits[1] > 0


def test_batch_never_holds_more_adapters_than_max_loras(zipf_trace, monkeypatch):
    seen, slot_counts = [], []
    original_step_s, original_admit = LoraStepCost.step_s, AdapterSlots.admit

    def step_s(self, n_tokens, n_adapters):
        seen.append(n_adapters)
        return original_step_s(self, n_tokens, n_adapters)

    def admit(self, adapter, rank):
        out = original_admit(self, adapter, rank)
        slot_counts.append(len(self.gpu))
        return out

    monkeypatch.setattr(LoraStepCost, "step_s", step_s)
    monkeypatch.setattr(AdapterSlots, "admit", admit)
    _run(zipf_trace, enable_lora=True, max_loras=3)
    assert max(seen) == 3 and max(slot_counts) == 3  # reached, never passed


def test_same_run_twice_is_identical(zipf_trace):
    first = _run(zipf_trace, enable_lora=True, max_loras=2)[1]
    second = _run(zipf_trace, enable_lora=True, max_loras=2)[1]
    first.pop("wall_time_s", None), second.pop("wall_time_s", None)
    assert first == second


def test_launch_line_carries_the_lora_flags():
    from sim.planner.launch_vllm import vllm_args

    args, _ = vllm_args(_cfg(enable_lora=True, max_loras=8, max_cpu_loras=32))
    line = " ".join(args)
    assert "--enable-lora --max-loras 8 --max-lora-rank 16 --max-cpu-loras 32" in line
    assert "--enable-lora" not in " ".join(vllm_args(_cfg())[0])


def test_continuous_policy_without_attribution_still_serves_adapters(zipf_trace):
    """The fused core (continuous, no attribution) does not model LoRA: such a run takes the engine."""
    cfg = EngineConfig(model=MODEL, hardware=HW, engine="vllm", policy="continuous", latency_attribution=False,
                       enable_lora=True, max_loras=2)
    summary = summarize(simulate(cfg, zipf_trace))
    assert summary["lora"]["loads"] > 0 and summary["lora"]["max_batch_adapters"] == 2


def test_generic_csv_names_adapters_by_column(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens,lora\n0,10,5,sql\n1,10,5,\n2,10,5,chat\n3,10,5,sql\n")
    trace = load_workload(str(path), "generic")
    assert trace.extra["adapter"].tolist() == [0, -1, 1, 0]
    mapped = tmp_path / "m.csv"
    mapped.write_text("arrival_s,prompt_tokens,output_tokens,model\n0,10,5,a\n1,10,5,b\n")
    assert "adapter" not in load_workload(str(mapped), "generic").extra  # `model` is read only when mapped
    assert load_workload(str(mapped), "generic", columns={"adapter": "model"}).extra["adapter"].tolist() == [0, 1]


def test_generic_jsonl_names_adapters(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"arrival_s": 1, "prompt_tokens": 4, "output_tokens": 2, "adapter": "x"}\n'
                    '{"arrival_s": 0, "prompt_tokens": 4, "output_tokens": 2}\n'
                    '{"arrival_s": 2, "prompt_tokens": 4, "output_tokens": 2, "adapter": "y"}\n')
    with pytest.warns(UserWarning):  # unsorted: sorted by arrival, the adapters with their rows
        trace = load_workload(str(path), "generic")
    assert trace.extra["adapter"].tolist() == [-1, 0, 1]


def test_radix_policy_serves_adapters_within_the_limit(zipf_trace):
    result = simulate(EngineConfig(model=MODEL, hardware=HW, engine="vllm", policy="radix", enable_lora=True,
                                   max_loras=3), zipf_trace)
    summary = summarize(result)
    assert summary["lora"]["max_batch_adapters"] == 3 and summary["lora"]["loads"] > 0
    assert summary["n_finished"] == len(zipf_trace)
