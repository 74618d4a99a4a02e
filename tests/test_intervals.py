"""Prediction intervals (seeded perturbed replays) and `extrapolating` in summary.json."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from sim.cost import CostModel
from sim.cost.tables import table_entry
from sim.cost.uncertainty import class_sigmas, draw_time_scale
from sim.inputs.config import EngineConfig
from sim.inputs.hardware import load_hardware
from sim.inputs.model import load_model
from sim.inputs.workload.trace import Trace
from sim.run.backends import LocalBackend
from sim.run.intervals import band, prediction_intervals, run_extrapolating
from sim.run.invoke import run


def _trace() -> Trace:
    rng = np.random.default_rng(3)
    n = 24
    return Trace(arrival_s=np.sort(rng.uniform(0, 2.0, n)), prompt_tokens=rng.integers(50, 400, n),
                 output_tokens=rng.integers(5, 40, n))  # fmt: skip


def test_time_scale_multiplies_each_class():
    model, hw = load_model("llama-2-7b"), load_hardware("h100-sxm")
    plain = CostModel(model, hw, tp=2)
    scaled = CostModel(model, hw, tp=2, time_scale={"gemm": 2.0, "attention": 3.0, "collective": 0.5})
    ops = {op.name: op.time_s for op in plain.breakdown([300, 1], [0, 500]).ops}
    ops2 = {op.name: op.time_s for op in scaled.breakdown([300, 1], [0, 500]).ops}
    assert ops2["qkv_proj"] == pytest.approx(2 * ops["qkv_proj"], rel=1e-12)
    assert ops2["allreduce"] == pytest.approx(0.5 * ops["allreduce"], rel=1e-12)
    assert ops2["elementwise"] == pytest.approx(ops["elementwise"], rel=1e-12)
    launch_s = hw.efficiency.kernel_launch_us * 1e-6  # launches are not part of the scaled rates
    assert ops2["decode_attention"] - launch_s == pytest.approx(3 * (ops["decode_attention"] - launch_s), rel=1e-9)
    # the hot path agrees with the breakdown under a time scale too
    q, c = np.array([300, 1]), np.array([0, 500])
    assert scaled.step_time_s(q, c, 2) == pytest.approx(scaled.breakdown(q, c).time_s, rel=1e-9)


def test_intervals_reproducible_with_a_seed_and_ordered():
    cfg = EngineConfig(model="llama-2-7b", hardware="h100-sxm", seed=5)
    first = prediction_intervals(cfg, _trace(), 4)
    again = prediction_intervals(cfg, _trace(), 4)
    assert first == again
    other = prediction_intervals(cfg.model_copy(update={"seed": 6}), _trace(), 4)
    assert other["ttft_s"]["p50"] != first["ttft_s"]["p50"]
    for key in ("ttft_s", "tpot_s", "e2e_s"):
        for stat in ("mean", "p50", "p90", "p99"):
            b = first[key][stat]
            assert b["p10"] <= b["p50"] <= b["p90"]
    assert first["tpot_s"]["p50"]["p10"] < first["tpot_s"]["p50"]["p90"]  # perturbation moves the numbers


def test_intervals_do_not_depend_on_where_the_replays_run():
    """Replays handed to worker processes (finishing in any order) give the same intervals; a
    resampled workload is drawn in this process for each replay, with that replay's seed."""
    cfg = EngineConfig(model="llama-2-7b", hardware="h100-sxm", seed=5)
    seeds = []

    def resample(seed):
        seeds.append(seed)
        trace = _trace()
        trace.arrival_s = trace.arrival_s * (1.0 + 0.1 * (seed % 3))
        return trace

    here = prediction_intervals(cfg, _trace(), 3, resample)
    with LocalBackend(2) as backend:
        apart = prediction_intervals(cfg, _trace(), 3, resample, backend.run_tasks)
    assert apart == here and apart["arrivals_resampled"]
    assert seeds == [6, 7, 8] * 2


def test_draws_follow_the_profile_sigmas():
    cost = CostModel(load_model("llama-2-7b"), load_hardware("h100-sxm"))
    sigmas = class_sigmas(cost)
    assert sigmas["gemm"] == load_hardware("h100-sxm").uncertainty["gemm"]
    draws = [draw_time_scale(sigmas, np.random.default_rng([0, i]))["gemm"] for i in range(4000)]
    assert np.std(np.log(draws)) == pytest.approx(sigmas["gemm"], rel=0.05)
    assert band([1.0, 2.0, None, float("nan"), 3.0]) == {"p10": 1.2, "p50": 2.0, "p90": 2.8}


def _measured_profile(tmp_path, model_name="llama-2-7b", m_max=2048):
    """h100-sxm with a table for every GEMM shape of the model at TP 1 and no guessed numbers."""
    cost = CostModel(load_model(model_name), load_hardware("h100-sxm"))
    m = np.array([1, 16, 256, m_max])
    entries = []
    shapes = cost._gemm_shapes() + [("lm_head", cost.model.vocab_size, cost.model.hidden_size)]
    for name, n, k in shapes:
        times = cost._gemm(m.astype(float), n, k)[0] * 1.1
        entries.append(table_entry(name, 1, n, k, 2, m, times))
    data = load_hardware("h100-sxm").model_dump(mode="json", exclude_none=True)
    data["calibration"] = {"tables": {"gemm": entries}}
    data["sources"] = {key: "measured-fit: test" for key in data["sources"]}
    path = tmp_path / "measured.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_extrapolating_set_and_cleared(tmp_path):
    default = EngineConfig(model="llama-2-7b", hardware="h100-pcie")  # a profile without measured tables
    reasons = run_extrapolating(default)
    assert any("guessed" in r for r in reasons) and any("no measured GEMM tables" in r for r in reasons)
    h100 = run_extrapolating(EngineConfig(model="llama-2-7b", hardware="h100-sxm"))  # AIConfigurator's grid
    assert not any("no measured GEMM tables" in r for r in h100)
    measured = str(_measured_profile(tmp_path))
    inside = EngineConfig(model="llama-2-7b", hardware=measured, max_num_batched_tokens=2048, max_num_seqs=64)
    assert run_extrapolating(inside) == []
    beyond = inside.model_copy(update={"max_num_batched_tokens": 4096})
    assert [r for r in run_extrapolating(beyond) if "beyond the measured 2048" in r]
    other_model = EngineConfig(model="llama-3-8b", hardware=measured, max_num_batched_tokens=2048)
    assert any("shape not measured" in r for r in run_extrapolating(other_model))
    output = run(inside, _trace())
    assert output.summary["extrapolating"] == []


def test_simulate_uncertainty_cli(tmp_path):
    from sim.cli import app

    trace = tmp_path / "t.csv"
    t = _trace()
    trace.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n" + "".join(
        f"{a},{p},{o}\n" for a, p, o in zip(t.arrival_s, t.prompt_tokens, t.output_tokens, strict=True)))
    args = ["simulate", "--trace", str(trace), "--model", "llama-2-7b", "--uncertainty", "3", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["intervals"]["n_replays"] == 3 and not summary["intervals"]["arrivals_resampled"]
    assert set(summary["intervals"]["ttft_s"]["p99"]) == {"p10", "p50", "p90"}
    assert summary["extrapolating"]
    bad = CliRunner().invoke(app, args[:-2] + ["1"])
    assert bad.exit_code == 2 and "--uncertainty" in bad.stderr


def test_band_over_draws_for_the_planner():
    from sim.run.intervals import band_over_draws, perturbed_cost_scales

    cfg = EngineConfig(model="llama-2-7b", hardware="h100-sxm", seed=2)
    draws = perturbed_cost_scales(cfg, 5)
    result = band_over_draws(cfg, 5, lambda scale: 10.0 / scale["gemm"])  # a capacity that falls as GEMMs slow
    assert result == band([10.0 / d["gemm"] for d in draws]) | {"n_draws": 5}
    assert result["p10"] < result["p50"] < result["p90"]
