"""The Ray backend against a local Ray cluster started here: the same rows as the local backend."""

from __future__ import annotations

import pandas as pd
import pytest

from sim.run.backends import LocalBackend, RayBackend
from sim.sweep.grid import expand, parse_grid
from sim.sweep.point import run_point
from sim.sweep.runner import run_sweep

ray = pytest.importorskip("ray")

GRID = ["max_num_seqs=32,256", "block_size=16,32", "qps=20"]
IGNORED = ["wall_time_s"]  # the only column that may differ between backends


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield
    ray.shutdown()


def _comparable(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.drop(columns=IGNORED).sort_values("point_id").reset_index(drop=True)


def test_ray_rows_equal_local_rows(tmp_path, local_ray):
    points = expand({}, {"max_requests": 150}, parse_grid(GRID))
    grid_keys = ["max_num_seqs", "block_size", "qps"]
    with RayBackend(None, 2) as backend:
        via_ray = run_sweep(points, grid_keys, tmp_path / "ray", backend)
    with LocalBackend(2) as backend:
        via_local = run_sweep(points, grid_keys, tmp_path / "local", backend)
    assert via_ray.n_ran == via_local.n_ran == 4
    pd.testing.assert_frame_equal(_comparable(via_ray.frame), _comparable(via_local.frame))
    assert via_ray.frame["ttft_s_p99"].nunique() > 1  # the grid points really differ
    assert ray.is_initialized()  # a session it did not start is left running

    in_process = run_point(points[0])
    stored = via_ray.frame.set_index("point_id").loc[points[0].point_id]
    assert stored["ttft_s_p99"] == in_process["ttft_s_p99"]
    assert stored["request_throughput"] == in_process["request_throughput"]


def test_ray_resumes_like_local(tmp_path, local_ray):
    points = expand({}, {"max_requests": 50}, parse_grid(["block_size=16,32,64"]))
    first = run_sweep(points[:1], ["block_size"], tmp_path, LocalBackend(1))
    with RayBackend(None, 2) as backend:
        second = run_sweep(points, ["block_size"], tmp_path, backend)
    assert (first.n_ran, second.n_skipped, second.n_ran) == (1, 1, 2)
    assert len(pd.read_parquet(tmp_path / "results.parquet")) == 3


def test_a_worker_input_error_comes_back_as_one(tmp_path, local_ray):
    from sim.errors import InputError

    points = expand({}, {"trace": str(tmp_path / "no_such.csv")}, parse_grid(["block_size=16"]))
    with pytest.raises(InputError):
        run_sweep(points, ["block_size"], tmp_path / "out", RayBackend(None, 2))


def _worker_pid() -> int:
    import os

    return os.getpid()


def test_a_local_pool_serves_every_call_until_closed():
    import os

    with LocalBackend(2) as backend:
        first = {pid for _, pid in backend.run_tasks(_worker_pid, [()] * 4)}
        second = {pid for _, pid in backend.run_tasks(_worker_pid, [()] * 4)}
        assert os.getpid() not in first
        assert first & second and len(first | second) <= 2  # the same workers served both calls
    assert backend._pool is None
