"""The sweep store: one part per finished point, results.parquet rebuilt from parts, resumable."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.errors import InputError
from sim.sweep.store import ResultStore, read_results


def _row(point_id: str, block_size: int, throughput: float | None = 1.0) -> dict:
    return {"point_id": point_id, "block_size": block_size, "request_throughput": throughput}


def test_rows_survive_a_reopen_and_results_follow_the_parts(tmp_path):
    store = ResultStore(tmp_path)
    store.add(_row("b", 16))
    store.add(_row("a", 32, None))
    store.consolidate(["block_size"])
    store.close()
    assert sorted(p.name for p in (tmp_path / "parts").iterdir()) == ["a.parquet", "b.parquet"]
    again = ResultStore(tmp_path)
    assert again.finished_ids() == {"a", "b"}
    frame = read_results(tmp_path)
    assert list(frame["point_id"]) == ["b", "a"]  # sorted by the grid key
    assert frame["request_throughput"].isna().tolist() == [False, True]
    again.close()


def test_a_part_without_a_rebuild_is_picked_up_next_time(tmp_path):
    """A kill between a point's part and the results rebuild: the next run's results hold it once."""
    store = ResultStore(tmp_path)
    store.add(_row("a", 8))
    store.consolidate()
    store.add(_row("b", 16))  # killed here: results.parquet still has one row
    assert len(read_results(tmp_path)) == 1
    store.close()
    reopened = ResultStore(tmp_path)
    frame = reopened.consolidate()
    assert sorted(frame["point_id"]) == ["a", "b"]
    reopened.close()


def test_temp_files_of_a_killed_write_are_removed_and_broken_parts_rerun(tmp_path):
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / ".c.parquet.x1y2").write_bytes(b"PAR1 half")
    (tmp_path / ".results.parquet.abc").write_bytes(b"half")
    (tmp_path / "parts" / "d.parquet").write_bytes(b"not parquet")  # not possible after a kill; a disk fault
    pd.DataFrame([_row("other", 8)]).to_parquet(tmp_path / "parts" / "e.parquet")  # id does not match name
    store = ResultStore(tmp_path)
    assert store.finished_ids() == set()
    assert sorted(p.name for p in tmp_path.rglob("*") if p.name.startswith(".") and p.is_file()) == [".sweep.lock"]
    store.add(_row("d", 8))
    assert store.finished_ids() == {"d"} and len(store.consolidate()) == 1
    store.close()


def test_one_sweep_per_folder_at_a_time(tmp_path):
    first = ResultStore(tmp_path)
    with pytest.raises(InputError, match="another sweep is writing"):
        ResultStore(tmp_path)
    first.close()
    ResultStore(tmp_path).close()


def test_out_must_be_a_folder(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError) as info:
        ResultStore(tmp_path / "file")
    assert info.value.where == "--out"


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcdef"), st.booleans()), max_size=20))
def test_any_order_of_adds_and_reopens_gives_one_row_per_point(tmp_path_factory, steps):
    """Oracle: the set of points added so far. Reopening (a restart) may happen between any two adds."""
    folder = tmp_path_factory.mktemp("store")
    store = ResultStore(folder)
    added = set()
    for point_id, restart in steps:
        store.add(_row(point_id, 8))
        added.add(point_id)
        if restart:
            store.close()
            store = ResultStore(folder)
    frame = store.consolidate()
    store.close()
    assert sorted(frame["point_id"]) == sorted(added)
