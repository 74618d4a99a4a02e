"""Imported AIConfigurator GEMM tables (issue 47): the importer, the grid lookups (interpolation inside,
the smooth model's ratio outside), the cost model and the `extrapolating:` notes that use them.
The fixture is a slice of AIConfigurator's H200 vLLM 0.24.0 table (tests/fixtures/aic/README.md)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from calibrate.import_aic import convert_gemm_rows, gemm_table_path, import_gemm_table, read_gemm_rows
from sim.cli import app
from sim.cost.extrapolation import extrapolation_reasons
from sim.cost.gemm_grid import load_gemm_grid
from sim.cost.model import CostModel
from sim.errors import InputError
from sim.inputs.hardware import load_hardware
from sim.inputs.model import load_model
from sim.paths import bundled_dir

FIXTURE = Path(__file__).parent / "fixtures" / "aic" / "gemm_perf_h200_slice.csv"
runner = CliRunner()


def _grid_file(tmp_path: Path, frame: pd.DataFrame | None = None) -> Path:
    grid = convert_gemm_rows(read_gemm_rows(FIXTURE) if frame is None else frame, {"commit": "test"})
    out = tmp_path / "grid.npz"
    grid.write_npz(out)
    load_gemm_grid.cache_clear()
    return out


def _measured_us(dtype: str, m: int, n: int, k: int) -> float:
    rows = pd.read_csv(FIXTURE)
    row = rows[(rows.gemm_dtype == dtype) & (rows.m == m) & (rows.n == n) & (rows.k == k)]
    return float(row.latency.iloc[0]) * 1e3


def _smooth(m, n, k):  # a stand-in smooth model: proportional to the FLOPs plus a floor
    return 5e-6 + 2.0 * np.asarray(m, dtype=np.float64) * n * k / 5e14


def test_the_importer_keeps_the_dtypes_we_price_and_converts_ms_to_us():
    grid = import_gemm_table(FIXTURE, {"commit": "test"})
    assert sorted(grid.time_us) == ["bf16", "fp8"]
    assert grid.skipped_dtypes == {"fp8_block": 6}
    assert list(grid.m_tokens) == [1, 16, 128, 1024, 4096]
    assert list(grid.n_out) == [1024, 2048, 4096] and list(grid.k_in) == [1024, 4096]
    assert grid.time_us["bf16"][3, 2, 1] == pytest.approx(_measured_us("bfloat16", 1024, 4096, 4096))
    assert grid.meta["device"] == "NVIDIA H200" and grid.meta["kernel_source"]["fp8"]
    assert not np.isnan(grid.time_us["fp8"]).any()


def test_parquet_and_npz_round_trip(tmp_path):
    parquet = tmp_path / "gemm_perf.parquet"
    pd.read_csv(FIXTURE).to_parquet(parquet)
    grid = import_gemm_table(parquet, {})
    out = tmp_path / "g.npz"
    assert grid.write_npz(out) == out.stat().st_size
    loaded = load_gemm_grid(str(out))
    assert np.exp(loaded.log_time_s["fp8"][0, 0, 0]) * 1e6 == pytest.approx(_measured_us("fp8", 1, 1024, 1024),
                                                                           rel=1e-6)


def test_repeats_keep_the_median_and_sources_the_fastest():
    rows = pd.DataFrame({"gemm_dtype": "bfloat16", "m": [1, 1, 1, 2, 2], "n": 8, "k": 8,
                         "kernel_source": ["a", "a", "a", "a", "b"], "latency": [1.0, 3.0, 2.0, 5.0, 4.0]})
    grid = convert_gemm_rows(rows, {})
    assert list(grid.time_us["bf16"][:, 0, 0]) == [2000.0, 4000.0]


def test_a_version_folder_that_reuses_another_reads_its_table(tmp_path):
    folder = tmp_path / "h200_sxm" / "gemm" / "vllm"
    (folder / "0.1").mkdir(parents=True)
    (folder / "0.1" / "gemm_perf.parquet").write_bytes(b"x")
    (folder / "0.2").mkdir()
    (folder / "0.2" / "reuse.yaml").write_text("reuse:\n- {table: gemm_perf, from_version: '0.1'}\n")
    assert gemm_table_path(tmp_path, "h200", "vllm", "0.2") == folder / "0.1" / "gemm_perf.parquet"
    with pytest.raises(InputError, match="gemm_perf.parquet"):
        gemm_table_path(tmp_path, "h200", "vllm", "0.3")


@pytest.mark.parametrize("column, value, message", [("latency", -1.0, "latency"), ("m", "x", "m")])
def test_bad_rows_are_one_clear_error(tmp_path, column, value, message):
    rows = pd.read_csv(FIXTURE)
    rows[column] = rows[column].astype(object)
    rows.loc[3, column] = value
    path = tmp_path / "bad.csv"
    rows.to_csv(path, index=False)
    with pytest.raises(InputError, match=message):
        read_gemm_rows(path)
    rows.drop(columns=["k"]).to_csv(path, index=False)
    with pytest.raises(InputError, match="k"):
        read_gemm_rows(path)


def test_lookups_are_exact_on_grid_points_and_interpolate_between(tmp_path):
    grid = load_gemm_grid(str(_grid_file(tmp_path)))
    on_grid = grid.curve("bf16", 2048, 4096, _smooth)
    m = np.array([1.0, 16, 128, 1024, 4096])
    measured = [_measured_us("bfloat16", int(x), 2048, 4096) * 1e-6 for x in m]
    assert on_grid.time_at_s(m, lambda x: _smooth(x, 2048, 4096)) == pytest.approx(measured, rel=1e-5)
    # between N 1024 and 2048 at the geometric midpoint: the geometric mean of the neighbours
    lo, hi = grid.curve("bf16", 1024, 4096, _smooth), grid.curve("bf16", 2048, 4096, _smooth)
    mid = grid.curve("bf16", 1448, 4096, _smooth)  # log-midpoint of 1024 and 2048 (1448.15)
    w = np.log(1448 / 1024) / np.log(2)
    assert mid.time_s == pytest.approx(np.exp((1 - w) * np.log(lo.time_s) + w * np.log(hi.time_s)))
    # M between 128 and 1024: between the neighbours, log-log
    t = on_grid.time_at_s(np.array([362.0]), lambda x: _smooth(x, 2048, 4096))[0]
    assert min(measured[2], measured[3]) < t < max(measured[2], measured[3])
    assert grid.curve("nvfp4", 2048, 4096, _smooth) is None  # no such dtype in the grid
    assert grid.curve("int4", 2048, 4096, _smooth) is None


def test_outside_the_grid_the_smooth_model_answers_scaled_at_the_edge(tmp_path):
    grid = load_gemm_grid(str(_grid_file(tmp_path)))
    edge = grid.curve("fp8", 4096, 4096, _smooth)
    beyond = grid.curve("fp8", 16384, 4096, _smooth)  # N above the grid's 4096
    ratio = _smooth(edge.m_tokens, 16384, 4096) / _smooth(edge.m_tokens, 4096, 4096)
    assert beyond.time_s == pytest.approx(edge.time_s * ratio)
    assert not grid.inside_nk(16384, 4096) and grid.inside_nk(4096, 1024)
    # M above the grid's 4096: the edge time times the smooth model's ratio
    t = edge.time_at_s(np.array([8192.0]), lambda x: _smooth(x, 4096, 4096))[0]
    assert t == pytest.approx(edge.time_s[-1] * _smooth(8192, 4096, 4096) / _smooth(4096, 4096, 4096))


def test_points_the_source_did_not_measure_drop_out(tmp_path):
    rows = pd.read_csv(FIXTURE)
    rows = rows[~((rows.gemm_dtype == "bfloat16") & (rows.m == 128) & (rows.n == 1024))]
    grid = load_gemm_grid(str(_grid_file(tmp_path, rows)))
    curve = grid.curve("bf16", 1024, 4096, _smooth)
    assert list(curve.m_tokens) == [1, 16, 1024, 4096]


def test_a_measured_slow_point_stays_where_it_was_measured(tmp_path):
    # no running maximum over M: a slow point (an outlier of the collector, or a kernel change at a tile
    # edge) prices its own M, not every larger one (docs/cost-model.md)
    rows = pd.read_csv(FIXTURE)
    slow = (rows.gemm_dtype == "bfloat16") & (rows.m == 16) & (rows.n == 2048) & (rows.k == 4096)
    rows.loc[slow, "latency"] *= 3.0
    grid = load_gemm_grid(str(_grid_file(tmp_path, rows)))
    curve = grid.curve("bf16", 2048, 4096, _smooth)
    m = np.array([16.0, 128.0])
    times_s = curve.time_at_s(m, lambda x: _smooth(x, 2048, 4096))
    assert times_s[0] == pytest.approx(3.0 * _measured_us("bfloat16", 16, 2048, 4096) * 1e-6, rel=1e-5)
    assert times_s[1] == pytest.approx(_measured_us("bfloat16", 128, 2048, 4096) * 1e-6, rel=1e-5)
    assert times_s[1] < times_s[0]


def test_a_step_with_no_tokens_costs_the_step_overhead_only():
    # no rows, no GEMM: the grid would answer M = 0 with its smallest M (Llama-3-8B on H100: 4.8 ms of weights)
    cost = CostModel(load_model("llama-3-8b"), load_hardware("h100-sxm"))
    assert cost.gemm_grid is not None
    empty = np.array([], dtype=np.int64)
    assert cost.layer_time_s(0) == 0.0
    assert cost.step_time_s(empty, empty, 0) == pytest.approx(cost.overhead_s)


def _profile_with_grid(tmp_path: Path, grid: Path) -> str:
    data = yaml.safe_load((bundled_dir("hwprofiles") / "h200.yaml").read_text())
    data["calibration"] = {"tables": {"gemm_grid": {"file": grid.name}}}  # relative to the profile's folder
    path = tmp_path / "h200-grid.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_the_cost_model_prices_gemms_from_the_grid_and_says_where_it_leaves_it(tmp_path):
    hw = load_hardware(_profile_with_grid(tmp_path, _grid_file(tmp_path)))
    cost = CostModel(load_model("llama-3-8b"), hw, tp=1)
    o_proj = next(op for op in cost.breakdown([1024], [0]).ops if op.name == "o_proj")  # 4096 x 4096
    assert o_proj.time_s == pytest.approx(_measured_us("bfloat16", 1024, 4096, 4096) * 1e-6, rel=1e-5)
    reasons = extrapolation_reasons(cost, max_tokens=8192, max_seqs=256)
    assert not any("no measured GEMM tables" in r for r in reasons)
    assert any(r.startswith("gate_up_proj 28672x4096: outside the measured GEMM grid") for r in reasons)
    assert any("o_proj 4096x4096: M up to 8192 beyond the grid's 4096" in r for r in reasons)
    smooth_only = CostModel(load_model("llama-3-8b"), load_hardware("h100-pcie"), tp=1)  # no tables
    assert any("no measured GEMM tables" in r for r in extrapolation_reasons(smooth_only, 8192, 256))


def test_a_missing_grid_file_is_one_clear_error(tmp_path):
    hw = load_hardware(_profile_with_grid(tmp_path, tmp_path / "nowhere.npz"))
    with pytest.raises(InputError, match="GEMM grid file not found"):
        CostModel(load_model("llama-3-8b"), hw, tp=1)


def test_cli_import_tables_writes_a_grid_and_refuses_a_bad_out(tmp_path):
    out = tmp_path / "g.npz"
    result = runner.invoke(app, ["calibrate", "import-tables", "--source", str(FIXTURE), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert sorted(load_gemm_grid(str(out)).log_time_s) == ["bf16", "fp8"]
    bad = runner.invoke(app, ["calibrate", "import-tables", "--source", str(FIXTURE),
                              "--out", str(tmp_path / "g.yaml")])
    assert bad.exit_code == 2 and "--out" in bad.output
    no_gpu = runner.invoke(app, ["calibrate", "import-tables", "--source", str(tmp_path), "--out", str(out)])
    assert no_gpu.exit_code == 2 and "--gpu" in no_gpu.output


@pytest.mark.parametrize("name, dtypes", [("h200", ["bf16", "fp8"]), ("b200", ["bf16", "fp8", "nvfp4"]),
                                          ("gb200-nvl72", ["bf16", "fp8", "nvfp4"])])
def test_bundled_profiles_carry_their_grid_with_its_licence(name, dtypes):
    hw = load_hardware(name)
    path = Path(hw.calibration["tables"]["gemm_grid"]["file"])
    assert path.is_file() and path.stat().st_size < 20e6
    grid = load_gemm_grid(str(path))
    assert sorted(grid.log_time_s) == dtypes and grid.meta["license"] == "Apache-2.0" and len(grid.meta["commit"]) == 40
    assert "Apache-2.0" in hw.sources["calibration"] and grid.meta["commit"][:12] in hw.sources["calibration"]


@pytest.mark.parametrize("arrays, field", [
    ({"m_tokens": [1, 2], "n_out": [8, 16], "k_in": [8, 16]}, "time_us_"),
    ({"m_tokens": [1, float("nan")], "n_out": [8, 16], "k_in": [8, 16], "time_us_bf16": np.ones((2, 2, 2))},
     "m_tokens"),
    ({"m_tokens": [1, 2], "n_out": [8, 16], "k_in": [8, 16], "time_us_bf16": -np.ones((2, 2, 2))}, "time_us_bf16"),
    ({"m_tokens": [1, 2], "n_out": [8, 16], "k_in": [8, 16], "time_us_bf16": np.ones((2, 2, 2)), "meta": "{"},
     "meta"),
])
def test_a_malformed_grid_file_is_one_clear_error(tmp_path, arrays, field):
    path = tmp_path / "bad.npz"
    np.savez(path, **{k: np.asarray(v) for k, v in arrays.items()})
    load_gemm_grid.cache_clear()
    with pytest.raises(InputError, match=field):
        load_gemm_grid(str(path))


def test_a_copy_of_a_bundled_profile_elsewhere_keeps_its_bundled_grid(tmp_path):
    copy = tmp_path / "my-h200.yaml"
    copy.write_text((bundled_dir("hwprofiles") / "h200.yaml").read_text())
    hw = load_hardware(str(copy))
    assert hw.calibration["tables"]["gemm_grid"]["file"] == str(bundled_dir("hwprofiles") / "tables" / "h200"
                                                                / "aic-vllm-0.24.0-gemm.npz")
