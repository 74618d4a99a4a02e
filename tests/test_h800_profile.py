"""hwprofiles/h800.yaml: the H100 SXM die with NVLink cut to 400 GB/s. It must load, and differ from
h100-sxm only in the fields its provenance says differ."""

from __future__ import annotations

import numpy as np

from sim.cost.all_to_all import all_to_all_time_s
from sim.inputs.hardware import load_hardware

# the fields that differ, and why (hwprofiles/h800.yaml provenance)
EXPECTED_DIFFERENCES = {
    "name", "description", "provenance", "sources",
    "interconnect.gpu_link_gb_s",  # 400 GB/s both ways instead of 900
    "cost_per_hour_usd",  # DeepSeek's $2 per GPU-hour
    "collectives",  # h100-sxm's fits were measured over 450 GB/s NVLink
    "uncertainty.collective",  # ring formula: a guessed class
    "calibration",  # the GEMM grid is h100-sxm's, its all-reduce table (measured over 900 GB/s NVLink) is not
}


def _flat(data: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in data.items():
        if isinstance(value, dict) and key in ("interconnect", "uncertainty", "compute", "memory"):
            out.update(_flat(value, f"{key}."))
        else:
            out[prefix + key] = value
    return out


def test_h800_is_h100_sxm_but_for_its_nvlink_price_and_collectives():
    h800, h100 = load_hardware("h800"), load_hardware("h100-sxm")
    a, b = _flat(h800.model_dump()), _flat(h100.model_dump())
    differing = {key for key in a.keys() | b.keys() if a.get(key) != b.get(key)}
    assert differing == EXPECTED_DIFFERENCES
    assert h800.interconnect.gpu_link_gb_s == 200 and h100.interconnect.gpu_link_gb_s == 450
    assert h800.collectives is None
    # the die's own numbers and the H800-measured DeepEP tables are h100-sxm's exactly
    assert h800.efficiency == h100.efficiency and h800.compute == h100.compute and h800.memory == h100.memory
    assert h800.all_to_all == h100.all_to_all


def test_cut_nvlink_makes_an_in_node_exchange_slower_and_leaves_the_nic_alone():
    h800, h100 = load_hardware("h800"), load_hardware("h100-sxm")
    payload = np.array([32e6])
    inside = [float(all_to_all_time_s(hw, 8, payload, "nccl", "dispatch")[0]) for hw in (h800, h100)]
    assert inside[0] > 2 * inside[1] * 0.9  # 200 vs 450 GB/s, the same latency
    across = [float(all_to_all_time_s(hw, 32, payload, "deepep_low_latency", "dispatch")[0]) for hw in (h800, h100)]
    assert across[0] == across[1]  # RDMA-bound: the same NIC
