"""Engine presets per version: what changed between vLLM releases, each difference with a test
(names, big-GPU defaults, prefix caching, async scheduling, CUDA-graph sizes, the custom all-reduce
rule, the API server's front end)."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from sim.cost import CostModel
from sim.cost.collectives import allreduce_fit, link_time_s
from sim.inputs.config import EngineConfig
from sim.inputs.engines import EngineOverhead, load_engine
from sim.inputs.engines.preset import engine_families, engine_versions
from sim.inputs.hardware import load_hardware
from sim.inputs.model import load_model
from sim.inputs.workload.trace import Trace
from sim.run.simulate import simulate
from sim.run.summary import summarize


def test_a_bare_family_name_is_its_newest_version():
    assert engine_families()["vllm"] == "vllm@0.15"
    assert engine_versions().index("vllm@0.6") < engine_versions().index("vllm@0.10") < engine_versions().index(
        "vllm@0.15")
    assert load_engine("vllm") == load_engine("vllm@0.15")
    for name in engine_versions():
        preset = load_engine(name)
        assert preset.version_range and preset.sources, name


def test_v1_defaults_depend_on_the_gpu_and_flags_still_win():
    """vLLM >= 0.9.1 (get_batch_defaults): >= 70 GiB and not A100 -> 1024 seqs / 8192 tokens."""
    big = EngineConfig(engine="vllm", hardware="h100-sxm")
    assert (big.max_num_seqs, big.max_num_batched_tokens) == (1024, 8192)
    small = EngineConfig(engine="vllm", hardware="a100-80g-sxm")
    assert (small.max_num_seqs, small.max_num_batched_tokens) == (256, 2048)
    assert EngineConfig(engine="vllm", hardware="l40s").max_num_seqs == 256  # 48 GB
    assert EngineConfig(engine="vllm", hardware="h100-sxm", max_num_seqs=128).max_num_seqs == 128
    v0 = EngineConfig(engine="vllm@0.6", hardware="h100-sxm")
    assert v0.max_num_seqs == 256  # V0 had no per-GPU defaults


def test_prefix_caching_is_on_from_v1_and_off_in_v0():
    assert EngineConfig(engine="vllm@0.15").policy == EngineConfig(engine="vllm@0.10").policy == "radix"
    assert EngineConfig(engine="vllm@0.6").policy == "continuous"


def test_v1_captures_graphs_up_to_twice_max_num_seqs():
    preset = load_engine("vllm@0.15")
    assert EngineOverhead.from_preset(preset, max_num_seqs=128).capture_sizes[-1] == 256
    assert EngineOverhead.from_preset(preset, max_num_seqs=1024).capture_sizes[-1] == 512
    assert EngineOverhead.from_preset(load_engine("vllm@0.6"), max_num_seqs=128).capture_sizes[-1] == 256


def _preset_copy(tmp_path, name: str, **overhead) -> str:
    data = load_engine(name).model_dump()
    data["overhead"].update(overhead)
    path = tmp_path / f"{name.replace('@', '_')}_{len(list(tmp_path.iterdir()))}.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _two_requests(second_at_s: float) -> Trace:
    return Trace(np.array([0.0, second_at_s]), np.array([64, 64]), np.array([200, 20]))


def test_async_scheduling_makes_a_mid_step_arrival_wait_one_more_step(tmp_path):
    """vLLM V1's async scheduler forms step n+1's batch when step n starts: a request arriving while
    step n runs joins step n+2. Same terms with async off: it joins step n+1."""
    sync = _preset_copy(tmp_path, "vllm@0.15", async_scheduling=False, frontend_ms=0.0)
    asyn = _preset_copy(tmp_path, "vllm@0.15", async_scheduling=True, frontend_ms=0.0)
    ttft = {}
    for label, preset in (("sync", sync), ("async", asyn)):
        cfg = EngineConfig(engine=preset, model="llama-3-8b", hardware="h100-sxm", record_steps=True)
        result = simulate(cfg, _two_requests(0.1003))
        ttft[label] = result.table.first_token_s[1] - result.table.arrival_s[1]
        steps = result.recorder.steps_frame()
        decode_step_s = float(steps["step_time_s"].iloc[len(steps) // 2])
    extra = ttft["async"] - ttft["sync"]
    assert extra == pytest.approx(decode_step_s, rel=0.05)


def test_the_front_end_adds_to_ttft_and_e2e_but_not_to_tpot(tmp_path):
    trace = Trace(np.arange(6) * 0.05, np.full(6, 300), np.full(6, 40))
    out = {}
    for frontend_ms in (0.0, 7.0):
        cfg = EngineConfig(engine=_preset_copy(tmp_path, "vllm@0.15", frontend_ms=frontend_ms), model="llama-3-8b")
        out[frontend_ms] = summarize(simulate(cfg, trace))
    assert out[7.0]["ttft_s"]["mean"] - out[0.0]["ttft_s"]["mean"] == pytest.approx(0.007, abs=1e-12)
    assert out[7.0]["e2e_s"]["mean"] - out[0.0]["e2e_s"]["mean"] == pytest.approx(0.007, abs=1e-12)
    assert out[7.0]["tpot_s"]["mean"] == pytest.approx(out[0.0]["tpot_s"]["mean"], rel=1e-12)


def test_vllm_runs_its_custom_all_reduce_only_where_vllm_enables_it():
    """Custom kernel: group of 2/4/6/8 on full NVLink (or 2 PCIe cards) and messages < 8 MiB; NCCL elsewhere."""
    model = load_model("llama-3-70b")
    rule = load_engine("vllm").custom_allreduce
    small, large = np.array([1e6]), np.array([16e6])
    sxm = load_hardware("h100-sxm")
    cost = CostModel(model, sxm, 4, allreduce_kind="engine", allreduce_rule=rule, step_overhead_s=0.0)
    assert cost._allreduce_s(small)[0] == pytest.approx(link_time_s(small, allreduce_fit(sxm, 4, "custom"))[0])
    assert cost._allreduce_s(large)[0] == pytest.approx(link_time_s(large, allreduce_fit(sxm, 4, "nccl"))[0])
    pcie = load_hardware("h100-pcie")
    for tp, kind in ((4, "nccl"), (2, "custom")):
        cost = CostModel(model, pcie, tp, allreduce_kind="engine", allreduce_rule=rule, step_overhead_s=0.0)
        fit = allreduce_fit(pcie, tp, kind)
        assert cost._allreduce_s(small)[0] == pytest.approx(link_time_s(small, fit)[0]), (tp, kind)
    auto = CostModel(model, pcie, 4, allreduce_kind="auto", step_overhead_s=0.0)
    engine = CostModel(model, pcie, 4, allreduce_kind="engine", allreduce_rule=rule, step_overhead_s=0.0)
    assert engine._allreduce_s(small)[0] >= auto._allreduce_s(small)[0]  # auto would have taken custom there
