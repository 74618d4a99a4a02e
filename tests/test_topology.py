"""Scale-up domains: a TP group that spans nodes all-reduces hierarchically over the NICs."""

from __future__ import annotations

import numpy as np
import pytest

from sim.cost import CostModel
from sim.cost.collectives import allreduce_fit, link_time_s
from sim.errors import InputError
from sim.inputs.hardware import HardwareProfile, load_hardware
from sim.inputs.model import load_model


def _ops(cost: CostModel, tokens: int) -> dict[str, float]:
    return {op.name: op.time_s for op in cost.breakdown([tokens], [0]).ops}


def _with_interconnect(hw: HardwareProfile, **fields) -> HardwareProfile:
    return hw.model_copy(update={"interconnect": hw.interconnect.model_copy(update=fields)})


def test_tp16_over_two_hgx_nodes_prices_the_scale_out_ring_on_the_nics():
    hw, model = load_hardware("h100-sxm"), load_model("llama-3.1-405b")
    tokens = 256
    ops = _ops(CostModel(model, hw, tp=16), tokens)
    payload = tokens * model.hidden_size * 2  # bf16 activations
    net_s, lat_s = hw.interconnect.network_gb_s * 1e9, hw.interconnect.network_latency_us * 1e-6
    # two domains of 8: one ring step each way, each GPU's NIC carries 2 * 1/2 of its 1/8 shard
    by_hand = 2 * (2 * lat_s + 2 * (1 / 2) * (payload / 8) / net_s)  # two all-reduces per layer
    assert ops["allreduce_scale_out"] == pytest.approx(by_hand, rel=1e-12)
    # the intra-node part is the node's own 8-GPU all-reduce (reduce-scatter + all-gather bytes)
    node = allreduce_fit(hw, 8, "nccl")  # the measured 8-GPU NCCL table of the profile
    assert ops["allreduce"] == pytest.approx(2 * link_time_s(np.array([float(payload)]), node)[0])


def test_the_same_tp16_inside_one_nvlink_domain_is_cheaper():
    """Before topology, TP16 over two servers cost what one 16-GPU NVLink domain costs."""
    hw, model = load_hardware("h100-sxm"), load_model("llama-3.1-405b")
    one_domain = _with_interconnect(hw, scale_up_domain_gpus=16)
    q, c = np.array([1] * 64), np.array([2048] * 64)
    across = CostModel(model, hw, tp=16).step_time_s(q, c, 64)
    inside = CostModel(model, one_domain, tp=16).step_time_s(q, c, 64)
    assert "allreduce_scale_out" not in _ops(CostModel(model, one_domain, tp=16), 64)
    assert across > inside * 1.05
    # the step total includes the scale-out op (hot path == breakdown)
    step = CostModel(model, hw, tp=16).breakdown(q, c)
    assert step.time_s == pytest.approx(across, rel=1e-9)


def test_one_node_tp_has_no_scale_out_op():
    cost = CostModel(load_model("llama-3-70b"), load_hardware("h100-sxm"), tp=8)
    assert "allreduce_scale_out" not in _ops(cost, 128)


def test_tp_that_does_not_fill_whole_domains_or_lacks_a_nic_is_refused():
    hw, model = load_hardware("h100-sxm"), load_model("llama-3.1-405b")
    with pytest.raises(InputError, match="multiple of 12"):  # a 12-GPU domain cannot hold half of TP16
        CostModel(model, _with_interconnect(hw, scale_up_domain_gpus=12), tp=16)
    no_nic = _with_interconnect(hw, network_gb_s=None, network_latency_us=None)
    with pytest.raises(InputError, match="network_gb_s"):
        CostModel(model, no_nic, tp=16)


def test_an_nvl72_rack_keeps_tp16_inside_its_nvlink_domain():
    """GB200 NVL72: 4 GPUs per tray but 72 per NVLink domain, so TP16 needs no NIC."""
    model, rack = load_model("llama-3.1-405b"), load_hardware("gb200-nvl72")
    assert rack.interconnect.max_gpus_per_node == 4 and rack.scale_up_gpus == 72
    assert "allreduce_scale_out" not in _ops(CostModel(model, rack, tp=16), 64)
    assert "allreduce_scale_out" in _ops(CostModel(model, load_hardware("b200"), tp=16), 64)


def test_a_group_across_nodes_all_reduces_with_nccl_whatever_the_kind():
    """One-shot custom all-reduce kernels need one NVLink domain; across nodes NCCL answers."""
    hw, model = load_hardware("h100-sxm"), load_model("llama-3.1-405b")
    assert _ops(CostModel(model, hw, tp=16, allreduce_kind="custom"), 8) == _ops(CostModel(model, hw, tp=16), 8)
    assert _ops(CostModel(model, hw, tp=8, allreduce_kind="custom"), 8) != _ops(CostModel(model, hw, tp=8), 8)
