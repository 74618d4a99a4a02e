"""Bounded work (issue 51 item 4): search spaces are counted before any work and refused above a
limit with the count and the flag that raises it; a Ray address that is not Ray is one line within
seconds (a TCP connect, then the gRPC / HTTP/2 handshake Ray's GCS answers)."""

from __future__ import annotations

import socket
import threading
import time
from contextlib import contextmanager

import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.errors import InputError
from sim.inputs.budget import check_search_space
from sim.planner.knobs import check_candidate_count
from sim.planner.layouts import LayoutGrid
from sim.run.ray_connect import HANDSHAKE_TIMEOUT_S, check_reachable

TRACE = "arrival_s,prompt_tokens,output_tokens\n0,100,10\n0.5,100,10\n"


def test_a_search_space_above_its_limit_names_the_count_and_the_flag():
    with pytest.raises(InputError, match=r"^--grid: 10 a x 10 b values make 100 points, above --max-points 99; ask "
                                         r"for fewer or raise --max-points$"):
        check_search_space(100, "10 a x 10 b values", "points", 99, "--grid", "--max-points")
    check_search_space(100, "10 a x 10 b values", "points", 100, "--grid", "--max-points")  # at the limit: runs


def test_plan_candidates_count_hardware_tp_layouts_policies_and_knobs():
    knobs = {"max_num_seqs": list(range(10)), "block_size": [16, 32]}
    check_candidate_count(["h100-sxm", "h200"], [1, 2], ["chunked"], knobs, None, 80)  # 2 x 2 x 1 x 20 = 80
    with pytest.raises(InputError, match=r"2 hardware x 2 tp x 1 policies x 10 max_num_seqs x 2 block_size make 80 "
                                         r"candidates, above --max-candidates 79"):
        check_candidate_count(["h100-sxm", "h200"], [1, 2], ["chunked"], knobs, None, 79)
    layouts = LayoutGrid(pps=(1, 2))  # tp 1 and 2, each with and without 2 pipeline stages: 4 layouts
    with pytest.raises(InputError, match=r"4 tp x layouts x 1 policies x 10 max_num_seqs x 2 block_size make 160"):
        check_candidate_count(["h100-sxm", "h200"], [1, 2], ["chunked"], knobs, layouts, 100)


def test_sweep_of_a_million_points_is_refused_before_any_work(tmp_path):
    (tmp_path / "t.csv").write_text(TRACE)
    values = ",".join(str(v) for v in range(1, 101))
    start_s = time.perf_counter()
    result = CliRunner().invoke(app, ["sweep", "-t", str(tmp_path / "t.csv"), "-o", str(tmp_path / "out"),
                                      "--no-plots", "-g", f"max_num_seqs={values}", "-g", f"seed={values}",
                                      "-g", f"block_size={values}"])
    assert result.exit_code == 2
    assert "make 1,000,000 points, above --max-points 1,000" in result.stderr
    assert time.perf_counter() - start_s < 10 and not (tmp_path / "out").exists()


def test_max_points_raises_the_limit(tmp_path):
    (tmp_path / "t.csv").write_text(TRACE)
    argv = ["sweep", "-t", str(tmp_path / "t.csv"), "-o", str(tmp_path / "out"), "--no-plots", "-g",
            "max_num_seqs=4,8,16"]
    refused = CliRunner().invoke(app, [*argv, "--max-points", "2"])
    assert refused.exit_code == 2 and "make 3 points, above --max-points 2" in refused.stderr
    assert CliRunner().invoke(app, [*argv, "--max-points", "3"]).exit_code == 0


@contextmanager
def listener(reply: bytes | None):
    """A TCP server on a free port that answers every connection with `reply` (None: says nothing)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    stop = threading.Event()

    def serve():
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except OSError:
                continue
            with connection:
                connection.recv(64)
                if reply is not None:
                    connection.sendall(reply)
                stop.wait(HANDSHAKE_TIMEOUT_S + 1)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        server.close()


@pytest.mark.parametrize("reply", [None, b"HTTP/1.1 400 Bad Request\r\n\r\n", b"-ERR unknown command\r\n"],
                         ids=["silent", "http1", "redis-like"])
def test_a_port_that_is_not_ray_is_refused_within_seconds(reply):
    with listener(reply) as address:
        start_s = time.perf_counter()
        with pytest.raises(InputError, match=rf"^--address: {address} listens but is not a Ray cluster"):
            check_reachable(address)
        assert time.perf_counter() - start_s < HANDSHAKE_TIMEOUT_S + 1


def test_a_grpc_server_passes_the_handshake():
    settings = bytes([0, 0, 6, 4, 0, 0, 0, 0, 0]) + bytes([0, 3, 0, 0, 0, 100])  # SETTINGS, stream 0
    with listener(settings) as address:
        check_reachable(address)


def test_sweep_on_a_ray_address_that_is_not_ray_is_one_line(tmp_path):
    pytest.importorskip("ray")
    (tmp_path / "t.csv").write_text(TRACE)
    with listener(b"HTTP/1.1 400 Bad Request\r\n\r\n") as address:
        start_s = time.perf_counter()
        result = CliRunner().invoke(app, ["sweep", "-t", str(tmp_path / "t.csv"), "-o", str(tmp_path / "out"),
                                          "--no-plots", "-g", "max_num_seqs=4,8", "--backend", "ray",
                                          "--address", address])
        assert time.perf_counter() - start_s < 15
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "listens but is not a Ray cluster" in lines[0]


def test_long_stages_report_each_tenth_with_the_time_left(capsys):
    from sim.cli.common import LONG_RUN_STEPS, ProgressLines

    lines = ProgressLines("plan", min_total=LONG_RUN_STEPS)
    for done in range(0, 101):
        lines("sizing candidates", done, 100)
    for done in range(0, 6):
        lines("a short stage", done, 5)  # below LONG_RUN_STEPS: quiet
    shown = capsys.readouterr().err.strip().splitlines()
    assert len(shown) == 11  # 0/100, each tenth, the end
    assert shown[1].startswith("plan: sizing candidates: 10/100, ") and shown[1].endswith(" left")
    assert shown[-1].startswith("plan: sizing candidates: 100/100, ") and "left" not in shown[-1]


def test_a_day_plan_whose_peak_needs_more_than_the_fleet_limit_is_refused_before_its_candidates():
    from sim.fleet.plan import _check_fleet_size

    _check_fleet_size(peak_rps=1000.0, capacity_rps=1.0)  # ~1,400 replicas: within 10,000
    with pytest.raises(InputError, match=r"peak of 1e\+06 req/s needs up to 1,375,002 replicas of 1 req/s each, "
                                         r"above the fleet limit of 10,000"):
        _check_fleet_size(peak_rps=1e6, capacity_rps=1.0)
