"""Arrow columns built from buffers equal Arrow's own conversions: CSV trace columns read in place
(`sim.inputs.workload.csv_formats.column_values`) equal `to_numpy`, value for value and dtype for dtype;
requests-table columns built from buffers (`sim.output.arrow_column`) equal `pyarrow.array`, and the
parquet file is the same bytes. So a CSV replay that writes its outputs imports no pandas (Arrow's
conversions would: ~0.2 s of the process)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sim.inputs.config import EngineConfig
from sim.inputs.workload.csv_formats import column_values
from sim.inputs.workload.trace import Trace
from sim.output import arrow_column, write_columns_parquet
from sim.run.simulate import simulate
from sim.run.summary import requests_columns

TYPES = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64(),
         pa.float32(), pa.float64()]


@pytest.mark.parametrize("arrow_type", TYPES, ids=str)
def test_numbers_read_in_place_equal_arrows_conversion(arrow_type):
    rng = np.random.default_rng(0)
    values = pa.array(rng.integers(0, 100, 50), type=arrow_type)
    for column in (values, values.slice(7, 30), values.slice(49), values.slice(3, 0)):  # offsets into the buffer
        ours, arrows = column_values(column), column.to_numpy(zero_copy_only=False)
        assert ours.dtype == arrows.dtype and ours.shape == arrows.shape
        assert ours.tobytes() == arrows.tobytes()


def test_nulls_and_other_types_go_through_arrow():
    with_null = pa.array([1.5, None, 3.0])
    assert np.isnan(column_values(with_null)[1]) and column_values(with_null)[2] == 3.0
    stamps = pa.array(np.array(["2023-11-16T18:15:46.6805900"], dtype="datetime64[ns]"))
    assert column_values(stamps).tobytes() == stamps.to_numpy(zero_copy_only=False).tobytes()
    assert column_values(pa.array(["a", "b"])).tolist() == ["a", "b"]


@pytest.mark.parametrize("values", [
    np.arange(7), np.arange(7, dtype=np.int32), np.linspace(0.0, 1.0, 9), np.array([np.nan, 1.5, -np.inf]),
    np.arange(20.0)[::3], np.arange(5, dtype=np.float32), np.array(["FINISHED", "REJECTED", "FINISHED"]),
    ["a", None, "é ü", None, "a"], [None, None], [], np.array([True, False]), [1, 2], np.arange(3, dtype=np.uint8),
], ids=repr)
def test_columns_built_from_buffers_equal_pyarrow_array(values):
    ours, arrows = arrow_column(values), pa.array(values)
    assert ours.type == arrows.type and ours.null_count == arrows.null_count
    if pa.types.is_floating(ours.type):  # bit for bit (NaN included)
        assert ours.to_numpy().tobytes() == arrows.to_numpy().tobytes()
    else:
        assert ours.equals(arrows)


def test_a_requests_table_is_the_same_parquet_bytes(tmp_path):
    trace = Trace(np.arange(40) * 0.05, np.full(40, 300), np.full(40, 20))
    trace.prompt_tokens[3] = 10_000  # rejected: a reject_reason among the None
    columns = requests_columns(simulate(EngineConfig(model="llama-3-8b", max_model_len=4096), trace))
    assert sum(reason is not None for reason in columns["reject_reason"]) == 1
    write_columns_parquet(tmp_path / "ours.parquet", columns)
    pq.write_table(pa.table(columns), tmp_path / "arrows.parquet")
    assert (tmp_path / "ours.parquet").read_bytes() == (tmp_path / "arrows.parquet").read_bytes()


def test_a_csv_replay_writing_its_outputs_imports_no_pandas(tmp_path):
    code = ("import atexit, sys; atexit.register(lambda: print('pandas' in sys.modules)); from sim.cli import main; "
            f"sys.argv = ['infersim', 'simulate', '--max-requests', '50', '--out', {str(tmp_path / 'run')!r}]; main()")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.split()
    assert (tmp_path / "run" / "requests.parquet").exists() and out[-1] == "False"
