"""Power and energy (sim/inputs/power.py, sim/cost/energy.py, sim/engine/energy.py,
sim/run/energy_summary.py): physical checks that fail when the model or its bookkeeping is wrong."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from sim.cli import app
from sim.errors import InputError
from sim.inputs.config import EngineConfig
from sim.inputs.hardware import load_hardware
from sim.inputs.workload.bench import bench_workload
from sim.inputs.workload.trace import Trace
from sim.paths import bundled_dir
from sim.run.simulate import simulate
from sim.run.summary import requests_columns, summarize

runner = CliRunner()
H100 = load_hardware("h100-sxm").power


def _run(workload, core="auto", **cfg):
    result = simulate(EngineConfig(model="llama-3.1-8b", hardware="h100-sxm", **cfg), workload, core=core)
    columns = requests_columns(result)
    return result, columns, summarize(result, columns)


def test_decode_heavy_run_draws_less_power_than_prefill_heavy_run():
    """Long prompts, one output token: compute-bound steps near the board limit; short prompts and long
    outputs: memory-bound decode steps below it (ML.ENERGY v3.0 measured Llama-3.1-8B on one H100 at
    batch 16 drawing 513 W, 0.73 of its 700 W: bench/data/power_mlenergy_v3.csv)."""
    _, _, prefill = _run(bench_workload("requests=64,isl=4096,osl=1"))
    _, _, decode = _run(bench_workload("batch=16,isl=64,osl=512"))
    p_prefill = prefill["energy"]["mean_power_w_per_gpu"]
    p_decode = decode["energy"]["mean_power_w_per_gpu"]
    assert H100.idle_w < p_decode < p_prefill <= H100.tdp_w * (1 + 1e-12)
    assert p_prefill > 0.9 * H100.tdp_w and p_decode < 0.8 * H100.tdp_w
    assert prefill["energy"]["compute_utilization_mean"] > decode["energy"]["compute_utilization_mean"]
    assert prefill["energy"]["p99_power_w_per_gpu"] == H100.tdp_w  # compute-bound steps are capped
    assert decode["energy"]["p99_power_w_per_gpu"] < 0.8 * H100.tdp_w  # its prompts are short, its steps decode


def test_energy_is_the_sum_over_steps_and_idle_gaps():
    """Every joule of a step goes to the requests in it; the rest of the run is idle power."""
    workload = Trace(arrival_s=[0.0, 0.5, 20.0], prompt_tokens=[900, 40, 300], output_tokens=[50, 200, 30])
    result, columns, summary = _run(workload)
    energy = summary["energy"]
    assert np.sum(columns["energy_j"]) == pytest.approx(energy["step_energy_j"], rel=1e-9)
    np.testing.assert_allclose(columns["energy_j"], columns["energy_prefill_j"] + columns["energy_decode_j"])
    assert (columns["energy_prefill_j"] > 0).all() and (columns["energy_decode_j"] > 0).all()
    busy_s = result.recorder.busy_s
    assert energy["idle_energy_j"] == pytest.approx(H100.idle_w * (result.sim_duration_s - busy_s), rel=1e-12)
    assert energy["energy_j"] == pytest.approx(energy["step_energy_j"] + energy["idle_energy_j"], rel=1e-12)
    # every step draws between idle and the board limit
    assert H100.idle_w * busy_s < energy["step_energy_j"] < H100.tdp_w * busy_s
    tokens = float(np.sum(columns["output_tokens"]))
    assert energy["j_per_output_token"] == pytest.approx(energy["energy_j"] / tokens)


def test_an_idle_replica_draws_idle_power_for_the_whole_run():
    """Two replicas, one request: the replica that never computes adds exactly idle watts x run time."""
    workload = Trace(arrival_s=[0.0], prompt_tokens=[200], output_tokens=[100])
    one, _, alone = _run(workload)
    two, _, pair = _run(workload, replicas=2)
    assert pair["energy"]["gpus"] == 2
    extra_j = pair["energy"]["energy_j"] - alone["energy"]["energy_j"]
    assert extra_j == pytest.approx(H100.idle_w * two.sim_duration_s, rel=1e-9)
    assert alone["energy"]["mean_power_w_per_gpu"] > pair["energy"]["mean_power_w_per_gpu"] > H100.idle_w


def test_a_sparse_workload_averages_close_to_idle_power():
    workload = Trace(arrival_s=[0.0, 600.0], prompt_tokens=[100, 100], output_tokens=[10, 10])
    _, _, summary = _run(workload)
    assert H100.idle_w < summary["energy"]["mean_power_w_per_gpu"] < H100.idle_w * 1.01
    assert summary["energy"]["p99_power_w_per_gpu"] == H100.idle_w  # idle for more than 99 % of the run


def _profile_with_power(tmp_path, power):
    data = yaml.safe_load((bundled_dir("hwprofiles") / "h100-sxm.yaml").read_text())
    data.pop("calibration", None)  # its table paths are relative to the bundled folder
    data["power"] = power
    path = tmp_path / "gpu.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("power, needle", [
    ({"idle_w": 800, "tdp_w": 700, "compute_weight": 1, "memory_weight": 0.5}, "must be below tdp_w"),
    ({"idle_w": 100, "tdp_w": 700, "compute_weight": -1, "memory_weight": 0.5}, "compute_weight"),
    ({"idle_w": 100, "tdp_w": 700, "memory_weight": 0.5}, "compute_weight"),
    ({"idle_w": 100, "tdp_w": "lots", "compute_weight": 1, "memory_weight": 0.5}, "tdp_w"),
])
def test_a_bad_power_section_is_refused_with_one_line(tmp_path, power, needle):
    path = _profile_with_power(tmp_path, power)
    with pytest.raises(InputError, match=needle):
        load_hardware(str(path))
    result = runner.invoke(app, ["simulate", "-H", str(path), "--max-requests", "5"])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "power" in lines[0] and "Traceback" not in result.output, result.output


def test_no_power_section_gives_no_energy_keys_and_one_notice(tmp_path):
    result = runner.invoke(app, ["simulate", "-H", "l40s", "--max-requests", "20", "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert result.output.count("energy: not reported") == 1
    assert "l40s has no power section" in result.output
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert "energy" not in summary
    import pyarrow.parquet as pq

    assert not any("energy" in name for name in pq.read_schema(tmp_path / "run" / "requests.parquet").names)


def test_electricity_options_price_the_energy_and_bad_ones_are_refused():
    args = ["simulate", "--max-requests", "30", "--json"]
    base = json.loads(runner.invoke(app, args).stdout)["energy"]
    priced = json.loads(runner.invoke(app, [*args, "--usd-per-kwh", "0.2", "--pue", "1.5"]).stdout)["energy"]
    assert priced["kwh_per_day"] == pytest.approx(base["kwh_per_day"] * 1.5 / base["pue"])
    assert priced["electricity_usd_per_day"] == pytest.approx(priced["kwh_per_day"] * 0.2)
    bad = runner.invoke(app, ["simulate", "--max-requests", "5", "--pue", "0.9"])
    assert bad.exit_code == 2 and len(bad.stderr.strip().splitlines()) == 1 and "--pue" in bad.stderr


def test_the_scalar_paths_give_the_array_paths_energy(monkeypatch):
    """Steps of a few sequences and one-step decode runs are metered in plain Python; the array
    paths give the same joules, run total and per request."""
    from sim.engine import energy
    from sim.run.invoke import load_run_workload

    workload = load_run_workload("splitwise_conv", rate_scale=4, max_requests=300)
    fast, fast_columns, _ = _run(workload, policy="chunked", core="engine")  # the engine's meter
    monkeypatch.setattr(energy, "SCALAR_MAX_SEQS", -1)
    monkeypatch.setattr(energy.EnergyMeter, "_one_step_run", lambda self, plan, sched: self._run(plan, sched))
    slow, slow_columns, _ = _run(workload, policy="chunked", core="engine")
    assert fast.recorder.energy.step_j == pytest.approx(slow.recorder.energy.step_j, rel=1e-12)
    np.testing.assert_allclose(fast_columns["energy_j"], slow_columns["energy_j"], rtol=1e-12)
