"""`infersim calibrate run|fit|report` through typer's test runner; sim/ stays torch-free."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

from calibrate.vidur_import import bundled_vidur_path
from sim.cost import CostModel
from sim.inputs.config import EngineConfig
from sim.inputs.hardware import load_hardware
from sim.inputs.model import load_model
from sim.inputs.workload.trace import Trace
from sim.run.simulate import simulate

MLP_7B = bundled_vidur_path("compute/h100/meta-llama/Llama-2-7b-hf/mlp.csv")
MLP_70B = bundled_vidur_path("compute/h100/meta-llama/Llama-2-70b-hf/mlp.csv")
ALLREDUCE = bundled_vidur_path("network/h100_dgx/all_reduce.csv")


@pytest.fixture(scope="module")
def cli():
    from sim.cli import app

    runner = CliRunner()
    return lambda *args: runner.invoke(app, ["calibrate", *map(str, args)])


@pytest.fixture(scope="module")
def vidur_profile(cli, tmp_path_factory):
    out = tmp_path_factory.mktemp("fit") / "h100-vidur.yaml"
    result = cli("fit", MLP_7B, ALLREDUCE, "--base", "h100-sxm", "--out", out, "--json")
    assert result.exit_code == 0, result.output
    return out, json.loads(result.stdout)


def test_fit_writes_a_profile_that_loads_and_simulates(vidur_profile):
    out, printed = vidur_profile
    hw = load_hardware(str(out))
    calibration = hw.calibration
    assert set(calibration["fitted"]) == {"gemm", "collectives"}
    assert "attention_compute" in calibration["kept_from_base"]
    assert [m["n_rows"] for m in calibration["measurements"]] == [4 * 1036, 2979]  # repeated keys merged
    assert calibration["residuals"]["per_op"]["down_proj"]["n"] == 1036
    assert printed["residuals"]["mape"] == pytest.approx(calibration["residuals"]["mape"], rel=1e-5)  # 6 digits
    fitted_tp4 = printed["fitted"]["collectives"]["terms"]["allreduce"]["nccl"]["4"]
    assert hw.collectives.allreduce["nccl"][4].latency_us == pytest.approx(fitted_tp4["latency_us"])
    assert 20 < fitted_tp4["latency_us"] < 60  # Vidur's H100 DGX NCCL: ~40 us per small all-reduce at TP 4
    assert len(calibration["tables"]["gemm"]) == 16  # 4 GEMMs x TP 1/2/4/8 of Llama-2-7B
    assert printed["n_tables"] == 16 and set(printed["uncertainty"]) >= {"gemm", "gemm_table", "collective"}
    cost = CostModel(load_model("llama-2-7b"), hw, tp=2)
    assert cost.step_time_s(np.array([512]), np.array([0]), 1) > 0
    trace = Trace(arrival_s=[0.0, 0.1, 0.2], prompt_tokens=[300, 40, 900], output_tokens=[20, 5, 9])
    result = simulate(EngineConfig(model="llama-2-7b", hardware=str(out), tp=2), trace)
    assert result.sim_duration_s > 0


def test_report_json_and_plot(cli, vidur_profile, tmp_path):
    out, _ = vidur_profile
    plot = tmp_path / "scatter.png"
    result = cli("report", out, MLP_70B, "--json", "--plot", plot)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert set(summary) == {"mape", "bias", "per_op"}
    assert set(summary["per_op"]) == {"qkv_proj", "o_proj", "gate_up_proj", "down_proj"}
    assert all(v["n"] == 1036 and 0 < v["mape"] < 0.13 for v in summary["per_op"].values())
    # 70B shares no projection shape with 7B: the smooth model answers every row
    assert all(v["answered_by"] == {"table": 0, "smooth": 1036} for v in summary["per_op"].values())
    in_sample = json.loads(cli("report", out, MLP_7B, "--json").stdout)
    assert all(v["answered_by"]["table"] == 1036 and v["mape"] < 1e-3 for v in in_sample["per_op"].values())
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    default = json.loads(cli("report", "h100-sxm", MLP_70B, "--json").stdout)
    assert default["mape"] < 0.10  # the bundled default is fitted on all bundled H100 data, 70B included
    table = cli("report", out, MLP_70B)
    assert table.exit_code == 0 and "down_proj" in table.stdout


@pytest.mark.parametrize(
    "content",
    [
        "op,time_s\nqkv_proj,0.1\n",  # our header, missing columns
        "time_stats.all_reduce.median,time_stats.all_reduce.std,num_workers,size\n-0.1,0,2,2048\n",  # negative time
        "time_stats.attn_pre_proj.median,num_tokens\n0.1,1\n",  # Vidur mlp.csv missing columns
        "\x00\x01garbage\xff\n",
        "",
        "just,some,columns\n1,2,3\n",
    ],
    ids=["missing-column", "negative-time", "vidur-missing", "garbage", "empty", "unknown-header"],
)
def test_bad_measurement_files_exit_2_with_one_line(cli, tmp_path, content):
    bad = tmp_path / "bad.csv"
    bad.write_bytes(content.encode("latin-1"))
    for args in (("fit", bad, "--out", tmp_path / "p.yaml"), ("report", "h100-sxm", bad)):
        result = cli(*args)
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and str(bad) in lines[0]
    assert not (tmp_path / "p.yaml").exists()


def test_bad_options_exit_2(cli, tmp_path):
    assert cli("fit", MLP_7B, "--out", tmp_path / "p.txt").exit_code == 2
    assert cli("fit", MLP_7B, "--base", "no-such-gpu", "--out", tmp_path / "p.yaml").exit_code == 2
    assert cli("report", "h100-sxm", MLP_7B, "--plot", tmp_path / "p.jpg").exit_code == 2
    assert cli("report", "h100-sxm", tmp_path / "missing.csv").exit_code == 2


def test_sim_and_fit_report_never_import_torch():
    code = (
        "import sys, sim.cli, sim.cli.calibrate, sim.run.simulate, sim.cost, sim.inputs.hardware, "
        "calibrate.fit, calibrate.report, calibrate.vidur_import, calibrate.profile_io\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_run_fit_report_pipeline_on_cpu(cli, tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "cpu.yaml"
    result = cli("run", "--device", "cpu", "--quick", "--out", out, "--json")
    assert result.exit_code == 0, result.output
    measurements = tmp_path / "cpu.measurements.csv"
    assert measurements.is_file()
    hw = load_hardware(str(out))
    assert set(hw.calibration["fitted"]) == {"gemm", "prefill_attention", "decode_attention"}
    assert "collectives" in hw.calibration["kept_from_base"]
    report = cli("report", out, measurements, "--json")
    assert report.exit_code == 0, report.output
    per_op = json.loads(report.stdout)["per_op"]
    assert {"qkv_proj", "decode_attention", "prefill_attention"} <= set(per_op)
    assert all(np.isfinite(v["mape"]) for v in per_op.values())
    # the run fills measured tables for GEMMs and attention: in-sample they answer (near-)exactly
    kinds = {entry["kind"] for entry in hw.calibration["tables"]["attention"]}
    assert kinds == {"prefill_attention", "decode_attention"}
    assert per_op["prefill_attention"]["mape"] < 1e-3
    assert per_op["decode_attention"]["answered_by"]["smooth"] == 0
    # GEMM tables answer every GEMM row (exactness is tested in test_cost_tables; here two toy ops
    # may share one (N, K) shape, whose table pools both ops' CPU timings)
    assert per_op["qkv_proj"]["answered_by"]["smooth"] == 0
    assert per_op["decode_attention"]["mape"] < 0.5  # a ratio per KV-token total: batches of one total differ


def _our_csv(rows: list[dict]) -> str:
    import pandas as pd

    from calibrate.measurements import COLUMNS

    common = {"op": "qkv_proj", "m_tokens": 64, "n_out": 12288, "k_in": 4096, "tp": 1, "dtype": "bf16",
              "time_s": 1e-4, "time_std_s": 0.0, "n_repeats": 5, "device": "gpu", "source": "test",
              "date": "2026-12-01"}  # fmt: skip
    return pd.DataFrame([common | row for row in rows]).reindex(columns=list(COLUMNS)).to_csv(index=False)


@pytest.mark.parametrize(
    ("rows", "column"),
    [
        ([{}, {"m_tokens": 128}, {"time_s": 2e-4}], "op,m_tokens,n_out,k_in"),  # row 3 repeats row 1
        ([{}, {"m_tokens": 128, "n_out": None}], "n_out"),  # a GEMM row without its shape
        ([{}, {"m_tokens": 128, "time_s": 0.0}], "time_s"),
        ([{}, {"m_tokens": 128, "time_s": -1e-4}], "time_s"),
        ([{}, {"op": "expert_mlp"}], "op"),  # an op the cost model does not have
    ],
    ids=["duplicate-rows", "missing-shape", "zero-time", "negative-time", "unknown-op"],
)
def test_bad_rows_exit_2_naming_file_and_column(cli, tmp_path, rows, column):
    bad = tmp_path / "bad.csv"
    bad.write_text(_our_csv(rows))
    out = tmp_path / "p.yaml"
    result = cli("fit", bad, "--out", out)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and column in lines[0], lines
    assert not out.exists()


def test_no_tables_writes_a_smooth_only_profile(cli, tmp_path):
    out = tmp_path / "smooth.yaml"
    result = cli("fit", MLP_7B, "--out", out, "--no-tables", "--json")
    assert result.exit_code == 0, result.output
    hw = load_hardware(str(out))
    assert "tables" not in hw.calibration and json.loads(result.stdout)["n_tables"] == 0
    report = json.loads(cli("report", out, MLP_7B, "--json").stdout)
    assert all(v["answered_by"]["table"] == 0 for v in report["per_op"].values())
    assert all(v["mape"] > 0.03 for v in report["per_op"].values())  # the smooth model is not exact
    text = cli("report", out, MLP_7B).stdout
    assert "smooth" in text and "bias" in text
