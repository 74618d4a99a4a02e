"""Collectives from the profile: per-TP fits, NCCL vs custom all-reduce, NVLink-bridged PCIe pairs."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import smooth_only

from sim.cost import CostModel
from sim.cost.collectives import allreduce_fit, link_time_s
from sim.errors import InputError
from sim.inputs.hardware import load_hardware
from sim.inputs.model import load_model


def _allreduce_s(cost: CostModel, tokens: int) -> float:
    return next(op.time_s for op in cost.breakdown([tokens], [0]).ops if op.name == "allreduce")


def test_layer_allreduce_is_two_fitted_collectives():
    hw = smooth_only(load_hardware("h100-sxm"))  # the fits, without the measured all-reduce tables
    model = load_model("llama-2-70b")
    cost = CostModel(model, hw, tp=4)
    fit = hw.collectives.allreduce["nccl"][4]
    payload = 8 * model.hidden_size * 2
    assert _allreduce_s(cost, 8) == pytest.approx(2 * (fit.latency_us * 1e-6 + payload / (fit.bus_gb_s * 1e9)))
    # Vidur's H100 DGX NCCL: tens of microseconds per small all-reduce at TP 4, not the old 8 us guess
    assert 20e-6 < fit.latency_us * 1e-6 < 60e-6


def test_custom_allreduce_is_faster_for_decode_and_selectable():
    model, hw = load_model("llama-2-70b"), smooth_only(load_hardware("h100-sxm"))
    nccl = CostModel(model, hw, tp=4)
    custom = CostModel(model, hw, tp=4, allreduce_kind="custom")
    assert _allreduce_s(custom, 16) < 0.5 * _allreduce_s(nccl, 16)
    assert custom.step_time_s(np.array([1] * 16), np.array([500] * 16), 16) < nccl.step_time_s(
        np.array([1] * 16), np.array([500] * 16), 16)
    with pytest.raises(InputError):
        CostModel(model, hw, tp=4, allreduce_kind="mpi")


def test_unmeasured_tp_takes_the_next_larger_fit_and_tp1_has_none():
    hw = load_hardware("h100-pcie")  # measured: TP 4 over PCIe between bridged pairs
    assert allreduce_fit(hw, 2) == hw.collectives.allreduce["nccl"][4]
    assert allreduce_fit(hw, 8) == hw.collectives.allreduce["nccl"][4]
    assert allreduce_fit(hw, 1) is None


def test_nvlink_bridge_pair_beats_pcie():
    model, hw = load_model("llama-2-7b"), load_hardware("a100-80g-pcie")
    pcie = CostModel(model, hw, tp=2)
    bridged = CostModel(model, hw, tp=2, nvlink_bridge=True)
    assert _allreduce_s(bridged, 4096) < 0.5 * _allreduce_s(pcie, 4096)
    with pytest.raises(InputError, match="tp 2"):
        CostModel(model, hw, tp=4, nvlink_bridge=True)
    with pytest.raises(InputError, match="nvlink_bridge"):
        CostModel(model, load_hardware("l40s"), tp=2, nvlink_bridge=True)


def test_profiles_without_collectives_keep_the_ring_formula():
    model, hw = load_model("llama-2-7b"), smooth_only(load_hardware("l40s"))  # without its measured tables
    assert hw.collectives is None
    cost = CostModel(model, hw, tp=2)
    payload = 100 * model.hidden_size * 2
    ring = hw.interconnect.gpu_link_latency_us * 1e-6 + payload / (hw.gpu_link_bytes_s * hw.efficiency.allreduce_bus)
    assert _allreduce_s(cost, 100) == pytest.approx(2 * ring)
    assert link_time_s(np.array([0.0]), load_hardware("h100-sxm").collectives.send_recv)[0] == 0.0


def test_two_shot_custom_allreduce_of_4_h100s_matches_vllms_graphed_timings():
    """vLLM runs its two-shot kernel inside CUDA graphs (no copy-in, no launch per call): the 4-GPU line
    follows vLLM's own graphed timings (calibrate.defaults.fit, PRs 24111 / 24532) at decode-batch sizes."""
    from calibrate.defaults.fit import CUSTOM_AR_H100_TWO_SHOT_GRAPHED_TP4, two_shot_graphed_tp4

    fit = load_hardware("h100-sxm").collectives.allreduce["custom"][4]
    assert fit.above == two_shot_graphed_tp4()  # the profile holds what the fit gives
    for size_mib, runs in CUSTOM_AR_H100_TWO_SHOT_GRAPHED_TP4.items():
        payload = np.array([size_mib * 1024 * 1024])
        measured_s = np.mean(runs) * 1e-3
        assert link_time_s(payload, fit)[0] == pytest.approx(measured_s, rel=0.15), size_mib
    # 1.75 MiB (112 decode tokens of a hidden-8192 model): below the eager-mode line it replaced
    eager = link_time_s(np.array([1.75 * 1024 * 1024]), type(fit)(latency_us=8.225, bus_gb_s=90.52))[0]
    assert link_time_s(np.array([1.75 * 1024 * 1024]), fit)[0] < 0.9 * eager
