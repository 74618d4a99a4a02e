"""EP / DP-attention layouts (sizing and refusals) and the MoE all-to-all pricing function."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.cost.all_to_all import a2a_payload_bytes, all_to_all_fit, all_to_all_time_s
from sim.errors import InputError
from sim.inputs.config import load_config
from sim.inputs.hardware import load_hardware
from sim.inputs.layout.layout_memory import plan_layout_memory
from sim.inputs.layout.memory import plan_memory
from sim.inputs.layout.parallel import ReplicaLayout
from sim.inputs.model import load_model

DEEPEP_LL = dict(tokens_per_rank=128, top_k=8, hidden=7168)  # DeepEP V1 low-latency test setting


def test_deepep_low_latency_fit_reads_its_published_latency_under_our_payload_convention():
    """FP8 dispatch with one fp32 scale per 128 channels; BF16 combine (DeepEP docs/legacy.md)."""
    hw = load_hardware("h100-sxm")
    dispatch = a2a_payload_bytes(**DEEPEP_LL, bytes_per_element=1, scale_bytes_per_token=7168 / 128 * 4)
    combine = a2a_payload_bytes(**DEEPEP_LL, bytes_per_element=2)
    published_us = {8: (77, 114), 64: (173, 314), 256: (194, 360)}
    for ep, (dispatch_us, combine_us) in published_us.items():
        assert all_to_all_time_s(hw, ep, dispatch, "deepep_low_latency") * 1e6 == pytest.approx(dispatch_us, rel=0.03)
        assert all_to_all_time_s(hw, ep, combine, "deepep_low_latency", "combine") * 1e6 == pytest.approx(
            combine_us, rel=0.03)


def test_unmeasured_ep_takes_the_nearest_measured_of_the_same_placement():
    hw = load_hardware("h100-sxm")
    fits = hw.all_to_all["deepep_low_latency"]["dispatch"]
    assert all_to_all_fit(hw, 24, "deepep_low_latency", "dispatch") == fits[32]  # next above
    assert all_to_all_fit(hw, 1024, "deepep_low_latency", "dispatch") == fits[256]  # largest
    assert all_to_all_fit(hw, 4, "deepep_low_latency", "dispatch") == fits[8]  # inside one node: EP 8's
    # normal kernels have only cross-node fits on H100: an intra-node EP is refused, not priced from them
    assert all_to_all_fit(hw, 8, "deepep_normal", "dispatch") is None
    with pytest.raises(InputError, match="no fit for EP 8 inside"):
        all_to_all_time_s(hw, 8, np.array([1e6]), "deepep_normal")
    b200 = load_hardware("b200")
    assert all_to_all_fit(b200, 4, "deepep_normal", "dispatch") == b200.all_to_all["deepep_normal"]["dispatch"][8]


def test_nccl_all_to_all_without_fits_is_the_alpha_beta_exchange():
    hw = load_hardware("h100-sxm")
    payload = np.array([0.0, 8e6])
    nvlink, nic = hw.interconnect.gpu_link_gb_s * 1e9, hw.interconnect.network_gb_s * 1e9
    inside = all_to_all_time_s(hw, 8, payload)
    assert inside[0] == 0.0
    assert inside[1] == pytest.approx(hw.interconnect.gpu_link_latency_us * 1e-6 + 7 / 8 * 8e6 / nvlink)
    across = all_to_all_time_s(hw, 16, payload)  # half the peers behind the NIC: it dominates
    assert across[1] == pytest.approx(hw.interconnect.network_latency_us * 1e-6 + 8 / 16 * 8e6 / nic)
    assert all_to_all_time_s(hw, 1, payload).tolist() == [0.0, 0.0]
    with pytest.raises(InputError, match="network_gb_s"):
        all_to_all_time_s(load_hardware("mi325x"), 16, payload)  # no NIC in that profile


def test_dp_attention_ranks_hold_their_own_kv_and_experts_spread_over_the_moe_group():
    model, hw = load_model("mixtral-8x7b"), load_hardware("h200")
    sglang = ReplicaLayout(tp=8, dp=8, enable_dp_attention=True).check(model.n_layers, True, model.n_experts)
    assert (sglang.n_gpus, sglang.attention_tp, sglang.n_kv_ranks, sglang.expert_parallel_size) == (8, 1, 8, 1)
    plan = plan_layout_memory(model, hw, sglang)
    # each rank keeps the whole model's KV of its own requests: all 8 KV heads on one GPU
    assert plan.kv_bytes_per_token_per_gpu == 2 * model.n_layers * model.n_kv_heads * model.head_dim * 2
    h, d = model.hidden_size, model.head_dim
    attention = h * (model.n_heads + 2 * model.n_kv_heads) * d + model.n_heads * d * h  # not split (attention TP 1)
    experts = model.n_experts * model.expert_params // 8  # split over the 8 GPUs of the MoE layer
    expected = model.n_layers * (attention + experts + h * model.n_experts) + model.embedding_params
    assert plan.weight_bytes_per_gpu == 2 * expected
    vllm = ReplicaLayout(tp=4, dp=2, enable_expert_parallel=True).check(model.n_layers, True, model.n_experts)
    assert (vllm.n_gpus, vllm.attention_tp, vllm.expert_parallel_size) == (8, 4, 8)
    # against plain TP4: the experts are spread twice as thin, so more room for KV
    assert plan_layout_memory(model, hw, vllm).num_gpu_blocks > plan_memory(model, hw, 4).num_gpu_blocks


def test_layouts_a_model_cannot_take_are_refused_in_one_line():
    mixtral, dense = load_model("mixtral-8x7b"), load_model("llama-3-8b")
    with pytest.raises(InputError, match="no experts to shard"):
        ReplicaLayout(tp=2, dp=2, enable_dp_attention=True).check(dense.n_layers, False)
    with pytest.raises(InputError, match="no experts to shard"):
        ReplicaLayout(ep=2).check(dense.n_layers, False)
    with pytest.raises(InputError, match="share its experts"):
        ReplicaLayout(tp=2, dp=2).check(mixtral.n_layers, True, 8)
    with pytest.raises(InputError, match="dividing --tp"):
        ReplicaLayout(tp=8, dp=3, enable_dp_attention=True).check(mixtral.n_layers, True, 8)
    with pytest.raises(InputError, match="routed experts"):
        ReplicaLayout(tp=16, ep=16).check(mixtral.n_layers, True, 8)


def test_engine_key_names_and_simulate_refuses_what_it_does_not_price():
    cfg = load_config(None, {"model": "mixtral-8x7b", "tp": 4, "data_parallel_size": 2,
                             "enable_expert_parallel": True, "expert_parallel_size": 8})
    assert (cfg.dp, cfg.ep, cfg.layout().n_gpus) == (2, 8, 8)
    runner = CliRunner()
    moe_ep = runner.invoke(app, ["simulate", "-m", "mixtral-8x7b", "--tp", "4", "--dp", "2",
                                 "--enable-expert-parallel", "--max-requests", "5"])
    assert moe_ep.exit_code == 0, moe_ep.output  # priced since the EP cost (sim/cost/expert_parallel.py)
    dp_only = runner.invoke(app, ["simulate", "-m", "mixtral-8x7b", "--tp", "8", "--dp", "8",
                                  "--enable-dp-attention", "--max-requests", "5"])
    assert dp_only.exit_code == 2 and "without expert parallelism" in dp_only.output
    sized = runner.invoke(app, ["memory", "-m", "mixtral-8x7b", "-H", "h200", "--tp", "8", "--dp", "8",
                                "--enable-dp-attention", "--json"])
    assert sized.exit_code == 0, sized.output
    assert '"n_kv_ranks": 8' in sized.output and '"n_gpus_per_replica": 8' in sized.output
