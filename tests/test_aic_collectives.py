"""Imported AIConfigurator all-reduce tables (issue 47): the importer (elements -> bytes, ms -> us, the
graph-captured custom rows), the lookups (interpolated inside, latency floor below, last bandwidth above)
and the cost model that prices all-reduces from them. Fixtures: tests/fixtures/aic/README.md."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from calibrate.import_aic_collectives import import_allreduce_tables, read_comm_rows, write_allreduce_npz
from sim.cost.collective_tables import MeasuredLink, load_allreduce_tables
from sim.cost.collectives import allreduce_fit, link_time_s
from sim.cost.model import CostModel
from sim.errors import InputError
from sim.inputs.hardware import load_hardware
from sim.inputs.model import load_model
from sim.paths import bundled_dir

FIXTURES = Path(__file__).parent / "fixtures" / "aic"
NCCL, CUSTOM = FIXTURES / "nccl_perf_h200_slice.csv", FIXTURES / "custom_allreduce_perf_h200_slice.csv"


def _latency_us(path: Path, tp: int, elements: int, **match) -> float:
    rows = pd.read_csv(path)
    rows = rows[(rows.num_gpus == tp) & (rows.message_size == elements)]
    for column, value in match.items():
        rows = rows[rows[column] == value]
    return float(rows.latency.iloc[0]) * 1e3


def test_the_importer_keeps_16_bit_all_reduce_rows_in_bytes_and_us():
    kinds = import_allreduce_tables(NCCL, CUSTOM)
    assert sorted(kinds) == ["custom", "nccl"] and sorted(kinds["nccl"]) == [2, 8]
    payload, time_us = kinds["nccl"][8]
    assert list(payload) == [512, 8192, 131072, 2097152, 33554432]  # 2 bytes per element
    assert time_us[2] == pytest.approx(_latency_us(NCCL, 8, 65536, op_name="all_reduce"))
    _, custom_us = kinds["custom"][2]  # the CUDA-graph rows, not the eager ones
    assert custom_us[0] == pytest.approx(_latency_us(CUSTOM, 2, 256, backend="vllm_graph"))


def test_lookups_interpolate_inside_and_stay_physical_outside():
    link = MeasuredLink("nccl", 8, np.array([1e3, 1e6, 1e8]), np.array([10e-6, 20e-6, 1000e-6]))
    assert link.time_at_s(np.array([1e6]))[0] == pytest.approx(20e-6)
    assert link.time_at_s(np.array([1e7]))[0] == pytest.approx(np.sqrt(20e-6 * 1000e-6))  # log-log midpoint
    assert link.time_at_s(np.array([10.0]))[0] == pytest.approx(10e-6)  # latency floor below
    slope = (1000e-6 - 20e-6) / (1e8 - 1e6)
    assert link.time_at_s(np.array([2e8]))[0] == pytest.approx(1000e-6 + 1e8 * slope)  # last bandwidth above
    assert link.time_at_s(np.array([0.0]))[0] == 0.0


def _profile_with_tables(tmp_path: Path) -> str:
    out = tmp_path / "ar.npz"
    write_allreduce_npz(out, import_allreduce_tables(NCCL, CUSTOM), {"commit": "test"})
    load_allreduce_tables.cache_clear()
    data = yaml.safe_load((bundled_dir("hwprofiles") / "h100-sxm.yaml").read_text())
    data["calibration"] = {"tables": {"allreduce": {"file": out.name}}}
    path = tmp_path / "h100-ar.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_the_cost_model_prices_all_reduces_from_the_tables(tmp_path):
    hw = load_hardware(_profile_with_tables(tmp_path))
    table = allreduce_fit(hw, 8, "nccl")
    assert isinstance(table, MeasuredLink)
    assert isinstance(allreduce_fit(hw, 4, "nccl"), type(load_hardware("h100-sxm").collectives.allreduce["nccl"][4]))
    cost = CostModel(load_model("llama-3-70b"), hw, tp=8)
    tokens = 64  # 64 x 8192 x 2 bytes = 1 MiB per all-reduce, two per layer
    row = next(op for op in cost.breakdown([tokens], [0]).ops if op.name == "allreduce")
    assert row.time_s == pytest.approx(2 * float(link_time_s(np.array([tokens * 8192 * 2.0]), table)[0]))


def test_bad_comm_tables_are_one_clear_error(tmp_path):
    rows = pd.read_csv(NCCL)
    rows.loc[0, "latency"] = -1.0
    bad = tmp_path / "bad.csv"
    rows.to_csv(bad, index=False)
    with pytest.raises(InputError, match="latency"):
        read_comm_rows(bad)
    np.savez(tmp_path / "bad.npz", nccl_tp2_bytes=np.array([2.0, 1.0]), nccl_tp2_time_us=np.array([1.0, 2.0]))
    with pytest.raises(InputError, match="nccl_tp2_bytes"):
        load_allreduce_tables(str(tmp_path / "bad.npz"))


@pytest.mark.parametrize("name", ["h100-sxm", "h200", "b200", "b300", "a100-80g-sxm", "l40s", "rtx-pro-6000"])
def test_bundled_profiles_carry_measured_all_reduce_tables(name):
    hw = load_hardware(name)
    for kind in ("nccl", "custom"):
        for tp in (2, 4, 8):
            assert isinstance(allreduce_fit(hw, tp, kind), MeasuredLink)
    assert "Apache-2.0" in hw.sources["calibration"]
