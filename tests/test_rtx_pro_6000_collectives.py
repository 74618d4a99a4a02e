"""RTX PRO 6000 (PCIe, no NVLink) carries an NCCL all-reduce fit from published community measurements;
TensorRT-LLM's attention-DP MoE all-gather / reduce-scatter there is priced as half of it."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import smooth_only

from sim.cost.all_to_all import allgather_reducescatter_time_s
from sim.cost.collectives import allreduce_fit
from sim.inputs.hardware import load_hardware


def test_eight_gpu_nccl_fit_is_the_published_median_and_labelled():
    hw = smooth_only(load_hardware("rtx-pro-6000"))  # the fit, without the measured all-reduce table
    fit = allreduce_fit(hw, 8, "nccl")
    assert fit.latency_us == 24.0
    assert fit.bus_gb_s == pytest.approx(39.4 / (2 * 7 / 8), abs=0.01)  # bus bandwidth -> payload rate
    assert "published" in hw.sources["collectives.nccl"]


def test_dep8_allgather_uses_the_fit_not_the_ring_formula():
    hw = smooth_only(load_hardware("rtx-pro-6000"))
    buffer = np.array([0.0, 1e6, 64e6])
    got = allgather_reducescatter_time_s(hw, 8, buffer, "dispatch")
    assert got[0] == 0.0
    assert got[1:] == pytest.approx(0.5 * (24e-6 + buffer[1:] / 22.51e9))
    ring_payload_gb_s = 64 * hw.efficiency.allreduce_bus / (2 * 7 / 8)  # what the profile priced before
    assert got[2] > 0.5 * buffer[2] / (ring_payload_gb_s * 1e9) * 1.1
