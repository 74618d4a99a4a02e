"""Redundant experts (EPLB slots, SGLang --ep-num-redundant-experts): layout, memory, MoE cost."""

import pytest

from sim.cost.expert_parallel import ExpertParallelCostModel, ExpertParallelism
from sim.errors import InputError
from sim.inputs.config import EngineConfig
from sim.inputs.hardware import load_hardware
from sim.inputs.layout.layout_memory import plan_layout_memory
from sim.inputs.layout.parallel import ReplicaLayout
from sim.inputs.model import load_model

DSV3 = load_model("deepseek-v3")
H100 = load_hardware("h100-sxm")


def _layout(ep: int, redundant: int = 0) -> ReplicaLayout:
    return ReplicaLayout(tp=ep, dp=ep, ep=ep, enable_dp_attention=True, n_redundant_experts=redundant)


def test_ep72_needs_the_32_redundant_slots_sglang_ran_with():
    with pytest.raises(InputError, match="256 routed experts; got 72"):
        _layout(72).check(DSV3.n_layers, True, DSV3.n_experts)
    with pytest.raises(InputError, match=r"256 routed \+ 16 redundant experts \(272 slots\); got 72"):
        _layout(72, 16).check(DSV3.n_layers, True, DSV3.n_experts)
    assert _layout(72, 32).check(DSV3.n_layers, True, DSV3.n_experts).physical_experts(256) == 288
    with pytest.raises(InputError, match="needs --ep"):
        ReplicaLayout(tp=8, n_redundant_experts=8).check(DSV3.n_layers, True, DSV3.n_experts)


def test_redundant_copies_cost_their_weights_on_every_gpu():
    plain = plan_layout_memory(DSV3, H100, _layout(32), weight_dtype="auto")
    eplb = plan_layout_memory(DSV3, H100, _layout(32, 32), weight_dtype="auto")
    one_expert_fp8 = DSV3.expert_params * 1  # the checkpoint's experts are fp8: one byte per weight
    extra = eplb.weight_bytes_per_gpu - plain.weight_bytes_per_gpu
    assert extra == pytest.approx(DSV3.n_moe_layers * (32 // 32) * one_expert_fp8, rel=1e-6)  # 9 slots, not 8
    assert eplb.num_gpu_blocks < plain.num_gpu_blocks


def test_redundant_slots_read_more_weights_for_the_same_token_pairs():
    def moe_op(redundant: int, batch: int):
        layout = _layout(32, redundant)
        cost = ExpertParallelCostModel(DSV3, H100, layout, "auto", "bf16", 16,
                                       expert_parallel=ExpertParallelism.of(layout))
        return {op.name: op for op in cost.breakdown([1] * batch, [2000] * batch).ops}["moe_mlp"]

    plain, eplb = moe_op(0, 4096), moe_op(32, 4096)  # every slot touched: 9 experts' weights vs 8
    assert eplb.flops == pytest.approx(plain.flops)
    share = DSV3.n_moe_layers / DSV3.n_layers
    weights = DSV3.expert_params * 1.0 * share
    assert eplb.bytes - plain.bytes == pytest.approx(weights, rel=0.01)
    small_plain, small_eplb = moe_op(0, 1), moe_op(32, 1)  # 32 tokens, 256 picks: few slots touched either way
    touched_plain, touched_eplb = 8 * (1 - (1 - 8 / 256) ** 32), 9 * (1 - (1 - 8 / 288) ** 32)
    assert touched_eplb / touched_plain == pytest.approx(1.047, abs=0.001)  # not 9 / 8
    assert small_eplb.bytes / small_plain.bytes == pytest.approx(touched_eplb / touched_plain, rel=0.005)


def test_vllm_and_sglang_names_are_one_knob():
    sglang = EngineConfig(model="deepseek-v3", tp=8, dp=8, enable_dp_attention=True, ep=8,
                          ep_num_redundant_experts=8)
    vllm = EngineConfig(model="deepseek-v3", tp=8, dp=8, enable_dp_attention=True, ep=8, num_redundant_experts=8)
    assert sglang.layout() == vllm.layout() and vllm.layout().n_redundant_experts == 8
    with pytest.raises(ValueError):
        EngineConfig(model="deepseek-v3", tp=8, ep=8, enable_eplb=True)  # rebalancing itself is not modelled


def test_sglang_ep72_decode_row_is_expressed_as_the_running_batchs_rate():
    import numpy as np

    from sim.run.simulate import _replica_parts
    from sim.validate.cases import bundled_case_files, load_cases
    from sim.validate.run import case_config, predict

    files = [p for p in bundled_case_files() if p.name == "sglang_large_scale_ep.csv"]
    case = next(c for c in load_cases(files) if c.case_id == "sglang-ep72-dsv3-h100-decode-2k")
    assert case.workload == "steady_decode" and case.concurrency == 256
    prediction = predict(case)
    assert prediction.predicted is not None, prediction.reason
    cfg = case_config(case)
    _, cost = _replica_parts(cfg, load_model(cfg.model), cfg.hardware, None)
    step_s = cost.step_time_s(np.ones(256, dtype=np.int64), np.full(256, 2050), 256)
    assert prediction.predicted == pytest.approx(72 * 256 / step_s, rel=1e-12)


def test_interleaved_moe_layers_hold_their_experts_once():
    """Llama-4 Maverick: experts on 24 of 48 layers. The EP layout's weights per GPU are the
    attention-TP-1 weights with only the MoE layers' experts re-split over the 8 EP GPUs (they
    came out negative when all 48 layers' experts were taken off)."""
    from sim.inputs.layout.layout_memory import layout_weight_elements_per_gpu
    from sim.inputs.layout.memory import weight_elements_per_gpu

    maverick = load_model("llama-4-maverick")
    assert maverick.n_moe_layers == 24 < maverick.n_layers
    layout = ReplicaLayout(tp=8, dp=8, ep=8, enable_dp_attention=True)
    experts = maverick.n_experts * maverick.expert_params
    whole_rank = weight_elements_per_gpu(maverick, 1)  # one attention rank's GPU holding every expert
    expected = whole_rank - maverick.n_moe_layers * (experts - experts // 8)
    assert layout_weight_elements_per_gpu(maverick, layout) == expected > 0
