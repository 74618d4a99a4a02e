"""TensorRT-LLM's all-reduce rule (strategy AUTO): its custom kernel while the message fits the workspace
(16 MB on 2 GPUs, 8 MB on more), NCCL beyond; and the B200 profile's collective fits."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import smooth_only

from sim.cost import CostModel
from sim.cost.collectives import allreduce_fit, link_time_s
from sim.inputs.engines.preset import load_engine
from sim.inputs.hardware import load_hardware
from sim.inputs.model import load_model


def _fits(hw_name: str):
    """The profile's collective fits, without its measured all-reduce tables (AIConfigurator's vLLM custom
    kernel is not TensorRT-LLM's; these tests are of the rule and the fits)."""
    return smooth_only(load_hardware(hw_name))


def _cost(hw_name: str, tp: int) -> CostModel:
    rule = load_engine("trtllm").custom_allreduce
    return CostModel(load_model("llama-3.3-70b"), _fits(hw_name), tp, allreduce_kind="engine",
                     allreduce_rule=rule, step_overhead_s=0.0)


def test_workspace_limit_is_16_mb_on_two_gpus_and_8_mb_above():
    rule = load_engine("trtllm").custom_allreduce
    assert rule.max_bytes_for(2) == 16_000_000 and rule.max_bytes_for(4) == rule.max_bytes_for(8) == 8_000_000
    assert load_engine("trtllm").allreduce_kind == "engine"


@pytest.mark.parametrize("hw_name", ["b200", "h100-sxm"])
def test_a_two_gpu_decode_batch_under_16_mb_takes_the_custom_kernel_even_where_nccl_is_faster(hw_name):
    hw = _fits(hw_name)
    cost = _cost(hw_name, 2)
    decode = np.array([436 * 8192 * 2.0])  # 436 sequences of hidden 8192 in bf16: 7.1 MB
    custom = link_time_s(decode, allreduce_fit(hw, 2, "custom"))[0]
    nccl = link_time_s(decode, allreduce_fit(hw, 2, "nccl"))[0]
    assert custom > nccl  # the one-shot kernel is the slower one at this size ...
    assert cost._allreduce_s(decode)[0] == pytest.approx(custom)  # ... and TensorRT-LLM still runs it
    prefill = np.array([2048 * 8192 * 2.0])  # 33.6 MB: beyond the workspace, NCCL
    assert cost._allreduce_s(prefill)[0] == pytest.approx(link_time_s(prefill, allreduce_fit(hw, 2, "nccl"))[0])


def test_four_gpus_switch_to_nccl_above_8_mb():
    hw = _fits("b200")
    cost = _cost("b200", 4)
    below, above = np.array([7.9e6]), np.array([8.1e6])
    assert cost._allreduce_s(below)[0] == pytest.approx(link_time_s(below, allreduce_fit(hw, 4, "custom"))[0])
    assert cost._allreduce_s(above)[0] == pytest.approx(link_time_s(above, allreduce_fit(hw, 4, "nccl"))[0])


def test_b200_nccl_fits_are_the_ring_formula_it_used_before():
    """Written as fits, the NCCL numbers keep the old ring formula: 8 us + 2 (t-1)/t x payload / (900 GB/s x 0.7)."""
    hw = _fits("b200")
    payload = np.array([1e6, 64e6])
    for tp in (2, 4, 8):
        ring = 8e-6 + 2 * (tp - 1) / tp * payload / (900e9 * 0.7)
        np.testing.assert_allclose(link_time_s(payload, allreduce_fit(hw, tp, "nccl")), ring, rtol=1e-9)


def test_the_b200_grid_scales_only_the_terms_it_names():
    import yaml

    from calibrate.trtllm_b200_attention import profile_at
    from sim.paths import bundled_dir

    base = yaml.safe_load((bundled_dir("hwprofiles") / "b200.yaml").read_text())
    out = profile_at(base, 0.5, 0.4, nccl=0.5)
    attention = base["efficiency"]["paged_attention_memory"]
    assert out["efficiency"]["paged_attention_memory"][32] == pytest.approx(attention[32] * 0.5)
    assert out["efficiency"]["gemm_compute_max_by_dtype"]["fp4"] == 0.4
    assert out["collectives"]["allreduce"]["nccl"][2]["bus_gb_s"] == pytest.approx(315.0)
    assert out["collectives"]["allreduce"]["custom"] == base["collectives"]["allreduce"]["custom"]
    assert base["collectives"]["allreduce"]["nccl"][2]["bus_gb_s"] == 630.0  # the base is not mutated
