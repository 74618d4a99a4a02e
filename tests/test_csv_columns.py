"""CSV trace columns read in place from Arrow buffers (`sim.workload.csv_formats.column_values`)
equal Arrow's own `to_numpy` conversion, value for value and dtype for dtype, and loading a CSV
trace imports no pandas (Arrow's conversion would: ~0.2 s of a replay's process)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from sim.workload.csv_formats import column_values

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


def test_loading_a_csv_trace_imports_no_pandas(tmp_path):
    code = ("import sys; from sim.workload import load_workload; t = load_workload('splitwise_conv'); "
            "print(len(t), 'pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["19366", "False"]
