"""Engine presets: loading, flag precedence, KV defaults, and the overhead model's step time in
hand-computed cases (CUDA-graph padding, serial vs overlapped CPU work, multi-step scheduling)."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from conftest import smooth_only

from sim.cost import CostModel
from sim.errors import InputError
from sim.inputs.config import EngineConfig, load_config
from sim.inputs.engines import EngineCost, EngineOverhead, engine_names, load_engine
from sim.inputs.engines.preset import engine_versions
from sim.inputs.hardware import load_hardware
from sim.inputs.layout.memory import plan_memory
from sim.inputs.model import load_model


@pytest.mark.parametrize("name", ["vllm", "sglang", "trtllm", "lmdeploy"])
def test_each_bundled_preset_loads_with_sources(name):
    assert name in engine_names()
    preset = load_engine(name)  # a bare family name is its newest bundled version
    assert preset.family == name and preset.name.startswith(f"{name}@") and preset.sources and preset.version
    cfg = EngineConfig(engine=name, hardware="a100-80g-sxm")  # A100: no big-GPU defaults in any preset
    assert cfg.policy == preset.scheduling.policy
    assert cfg.max_num_batched_tokens == preset.scheduling.max_num_batched_tokens
    assert cfg.block_size == preset.scheduling.block_size


def test_an_explicit_flag_overrides_the_preset(tmp_path):
    cfg = load_config(None, {"engine": "vllm", "max_num_batched_tokens": 1024, "block_size": 32,
                             "hardware": "a100-80g-sxm"})
    assert (cfg.max_num_batched_tokens, cfg.block_size) == (1024, 32)
    assert cfg.max_num_seqs == load_engine("vllm").scheduling.max_num_seqs  # not given: the preset's
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"engine": "sglang", "policy": "chunked"}))
    cfg = load_config(path, {"max_num_seqs": 7})
    assert (cfg.policy, cfg.max_num_seqs) == ("chunked", 7)
    assert cfg.chunk_size == load_engine("sglang").scheduling.chunk_size
    assert load_config(path, {"policy": "continuous"}).chunk_size is None  # not leaked into continuous


def test_a_smaller_explicit_budget_caps_the_presets_chunk():
    """QA: --engine sglang --max-num-batched-tokens 2048 failed on the preset's chunk_size 8192, a
    knob the user never gave; an explicit chunk larger than the budget is still refused."""
    assert load_config(None, {"engine": "sglang", "max_num_batched_tokens": 2048}).chunk_size == 2048
    assert load_config(None, {"engine": "sglang", "max_num_batched_tokens": 32768}).chunk_size == 8192
    with pytest.raises(InputError, match="chunk_size must not exceed"):
        load_config(None, {"engine": "sglang", "max_num_batched_tokens": 2048, "chunk_size": 4096})


def test_quantized_checkpoint_takes_the_presets_kv_default():
    assert EngineConfig(engine="trtllm", weight_dtype="fp8").kv_dtype == "fp8"
    assert EngineConfig(engine="trtllm", weight_dtype="bf16").kv_dtype == "bf16"
    assert EngineConfig(engine="vllm", weight_dtype="fp8").kv_dtype == "bf16"
    assert EngineConfig(engine="trtllm", weight_dtype="fp8", kv_dtype="bf16").kv_dtype == "bf16"


def _write_preset(tmp_path, **changes):
    data = load_engine("vllm@0.6").model_dump()
    for key, value in changes.items():
        section, _, field = key.partition("__")
        if field:
            data[section][field] = value
        else:
            data[section] = value
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_bad_presets_name_the_file_and_field(tmp_path):
    with pytest.raises(InputError, match="unknown engine 'vlm'"):
        load_engine("vlm")
    with pytest.raises(InputError, match="overhead.per_seq_us"):
        load_engine(_write_preset(tmp_path, overhead__per_seq_us=-1.0))
    with pytest.raises(InputError, match="unknown field"):
        load_engine(_write_preset(tmp_path, overhead__per_request_us=1.0))
    with pytest.raises(InputError, match="capture_sizes"):
        load_engine(_write_preset(tmp_path, cuda_graph__capture_sizes=[8, 4]))
    with pytest.raises(InputError, match="unknown dtype"):
        load_engine(_write_preset(tmp_path, kv__dtype="fp7"))


class LinearGpu:
    """A stand-in GPU: non-attention layer time n_tokens * 1 us per layer, 2 layers, and a fixed
    10 ms for the rest of any step (so padding is the only thing that changes the GPU time)."""

    class model:
        n_layers = 2

    def layer_time_s(self, n_tokens: int) -> float:
        return n_tokens * 1e-6

    def step_time_s(self, q, c, n_sampled, verify_tokens=1) -> float:
        return 0.010

    def decode_run(self, contexts, n_steps):
        return np.full(n_steps, 0.010), None


def _overhead(**kw) -> EngineOverhead:
    base = dict(per_step_s=100e-6, per_seq_s=10e-6, per_token_s=1e-6, overlap=False, residue_s=0.0,
                num_scheduler_steps=1, capture_sizes=(1, 2, 4, 8), graph_scope="decode")
    base.update(kw)
    return EngineOverhead(**base)


def test_decode_batch_pads_to_the_next_captured_size_and_serial_cpu_adds():
    cost = EngineCost(LinearGpu(), _overhead())
    # 5 decodes run the graph of 8: gpu = 10 ms + 2 layers * (8 - 5) us = 10.006 ms;
    # cpu = 100 + 10 * 5 + 1 * 5 = 155 us; serial: 10.161 ms
    step = cost.step_time_s(np.ones(5, dtype=np.int64), np.full(5, 100), 5)
    assert step == pytest.approx(0.010006 + 0.000155, abs=1e-12)
    # 8 decodes need no padding; 9 is beyond the largest graph (eager, no padding)
    assert cost.step_time_s(np.ones(8, dtype=np.int64), np.full(8, 100), 8) == pytest.approx(0.010 + 0.000188)
    assert cost.step_time_s(np.ones(9, dtype=np.int64), np.full(9, 100), 9) == pytest.approx(0.010 + 0.000199)
    # a prefill step is not padded under scope "decode": 3 + 1 tokens -> cpu 100 + 20 + 4 = 124 us
    assert cost.step_time_s(np.array([3, 1]), np.array([0, 50]), 2) == pytest.approx(0.010 + 0.000124)


def test_scope_all_pads_mixed_steps_by_token_count():
    cost = EngineCost(LinearGpu(), _overhead(graph_scope="all"))
    # 3 + 2 = 5 tokens pad to 8: + 2 * 3 us; cpu = 100 + 20 + 5 = 125 us
    assert cost.step_time_s(np.array([3, 2]), np.array([0, 0]), 2) == pytest.approx(0.010006 + 0.000125)


def test_overlap_takes_the_longer_of_gpu_and_cpu_plus_residue():
    cost = EngineCost(LinearGpu(), _overhead(overlap=True, residue_s=20e-6))
    assert cost.step_time_s(np.ones(5, dtype=np.int64), np.full(5, 9), 5) == pytest.approx(0.010006 + 20e-6)
    heavy = EngineCost(LinearGpu(), _overhead(overlap=True, residue_s=20e-6, per_step_s=0.015))
    # cpu = 15 ms + 50 us + 5 us > gpu: step = cpu + residue
    assert heavy.step_time_s(np.ones(5, dtype=np.int64), np.full(5, 9), 5) == pytest.approx(0.015055 + 20e-6)


def test_multi_step_scheduling_amortises_the_scheduling_cost_of_decode_steps():
    cost = EngineCost(LinearGpu(), _overhead(num_scheduler_steps=4, capture_sizes=()))
    # decode: (100 + 10 * 5) / 4 + 1 * 5 = 42.5 us
    assert cost.step_time_s(np.ones(5, dtype=np.int64), np.full(5, 9), 5) == pytest.approx(0.010 + 42.5e-6)
    times, _ = cost.decode_run(np.full(5, 9), 3)
    np.testing.assert_allclose(times, 0.010 + 42.5e-6)
    # a prefill step is scheduled every time: 100 + 10 + 7 = 117 us
    assert cost.step_time_s(np.array([7]), np.array([0]), 1) == pytest.approx(0.010 + 117e-6)


def test_padding_on_the_real_cost_model_is_the_padded_batchs_non_attention_work():
    # the smooth model: a measured grid is not monotone in M everywhere (see docs/cost-model.md)
    model, hw = load_model("llama-3-8b"), smooth_only(load_hardware("h100-sxm"))
    gpu = CostModel(model, hw, step_overhead_s=0.0)
    over = _overhead(per_step_s=0.0, per_seq_s=0.0, per_token_s=0.0, capture_sizes=(8, 16))
    cost = EngineCost(gpu, over)
    q, c = np.ones(5, dtype=np.int64), np.full(5, 300)
    expected = gpu.step_time_s(q, c, 5) + model.n_layers * (gpu.layer_time_s(8) - gpu.layer_time_s(5))
    assert cost.step_time_s(q, c, 5) == pytest.approx(expected, rel=1e-12)
    assert cost.decode_run(c, 1)[0][0] == pytest.approx(expected, rel=1e-9)
    assert expected > gpu.step_time_s(q, c, 5)


def test_engine_replaces_the_hardware_step_constant():
    model, hw = load_model("llama-3-8b"), load_hardware("h100-sxm")
    legacy = CostModel(model, hw)
    bare = CostModel(model, hw, step_overhead_s=0.0)
    q, c = np.ones(4, dtype=np.int64), np.full(4, 100)
    assert legacy.step_time_s(q, c, 4) - bare.step_time_s(q, c, 4) == pytest.approx(
        hw.efficiency.step_overhead_us * 1e-6)


def test_fp8_kv_doubles_the_kv_block_count():
    model, hw = load_model("llama-3-8b"), load_hardware("h100-sxm")
    bf16 = plan_memory(model, hw, kv_dtype="bf16").num_gpu_blocks
    fp8 = plan_memory(model, hw, kv_dtype="fp8").num_gpu_blocks
    assert fp8 in (2 * bf16, 2 * bf16 + 1)


def test_weight_only_int4_quarters_weight_bytes_and_keeps_bf16_math():
    model, hw = load_model("llama-3-70b"), load_hardware("h100-sxm")
    bf16 = plan_memory(model, hw, tp=4)
    int4 = plan_memory(model, hw, tp=4, weight_dtype="int4")
    assert int4.weight_bytes_per_gpu == pytest.approx(bf16.weight_bytes_per_gpu / 4, abs=1)
    cost = CostModel(model, hw, weight_dtype="int4")
    assert cost.peak_flops == pytest.approx(hw.peak_flops("dense_bf16_tflops") / 1.15)
    assert CostModel(model, hw, weight_dtype="fp8").peak_flops == hw.peak_flops("dense_fp8_tflops")


def test_fp4_needs_a_gpu_with_fp4_tensor_cores():
    model = load_model("llama-3-8b")
    assert CostModel(model, load_hardware("b200"), weight_dtype="fp4").peak_flops == 9000e12
    with pytest.raises(InputError, match="dense_fp4_tflops"):
        CostModel(model, load_hardware("h100-sxm"), weight_dtype="fp4")


def test_engines_command_lists_every_preset():
    import json

    from typer.testing import CliRunner

    from sim.cli import app

    result = CliRunner().invoke(app, ["engines", "--json"])
    assert result.exit_code == 0, result.output
    assert [p["name"] for p in json.loads(result.stdout)] == engine_versions()
    assert {"vllm@0.6", "vllm@0.10", "vllm@0.15"} <= set(engine_versions())


def test_summary_records_the_effective_engine_settings():
    import json

    from typer.testing import CliRunner

    from sim.cli import app

    result = CliRunner().invoke(app, ["simulate", "--engine", "trtllm", "--weight-dtype", "fp8", "--max-num-seqs", "64",
                                      "--num-scheduler-steps", "4", "--enforce-eager", "--bench",
                                      "requests=20,isl=64,osl=8", "--json"])
    assert result.exit_code == 0, result.output
    engine = json.loads(result.stdout)["engine"]
    assert engine["engine"] == "trtllm@1.2" and engine["kv_dtype"] == "fp8" and engine["max_num_seqs"] == 64
    assert engine["engine_version_range"] == load_engine("trtllm").version_range
    assert engine["block_size"] == load_engine("trtllm").scheduling.block_size
    assert engine["overhead"]["num_scheduler_steps"] == 4 and engine["cuda_graph_capture_sizes"] == []
    assert engine["allreduce_kind"] == "engine"  # TensorRT-LLM AUTO: its custom kernel up to the workspace size


def test_auto_allreduce_takes_the_faster_kind_per_message():
    # the fits, which cross over; AIConfigurator's measured H200 TP 8 tables meet at 64 MB (309 us both)
    model, hw = load_model("llama-3-70b"), smooth_only(load_hardware("h200"))
    costs = {kind: CostModel(model, hw, tp=8, allreduce_kind=kind, step_overhead_s=0.0)
             for kind in ("nccl", "custom", "auto")}
    payload = np.array([4096.0, 64e6])  # a decode step's bytes vs a large prefill's
    times = {kind: cost._allreduce_s(payload) for kind, cost in costs.items()}
    assert times["custom"][0] < times["nccl"][0] and times["nccl"][1] < times["custom"][1]  # the crossover
    np.testing.assert_array_equal(times["auto"], np.minimum(times["nccl"], times["custom"]))


def test_a_bad_allreduce_value_names_the_allreduce_flag():
    """QA: `--allreduce bogus` was reported as a bad `--allreduce-kind`, a flag that does not exist."""
    from typer.testing import CliRunner

    from sim.cli import app

    result = CliRunner().invoke(app, ["simulate", "--max-requests", "5", "--allreduce", "bogus"])
    assert result.exit_code == 2 and result.output.startswith("error: --allreduce: ")
