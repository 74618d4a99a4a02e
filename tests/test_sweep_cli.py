"""`infersim sweep` end to end: kill -9 midway and resume, bad input, skipping finished points."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.sweep.grid import expand, load_base, parse_grid
from sim.sweep.point import run_point

REPO = Path(__file__).resolve().parents[1]
GRID_4X4 = ["--grid", "max_num_seqs=32,64,128,256", "--grid", "block_size=16,32,64,128"]
# qps 20 loads the replica enough that the knobs matter; 300 requests make a point take ~0.1-0.4 s
WORKLOAD = ["--grid", "qps=20", "--max-requests", "300"]
KILL_AFTER_N_PARTS = 3
WAIT_LIMIT_S = 60.0


def _parts(out: Path) -> list[Path]:
    folder = out / "parts"
    return [p for p in folder.glob("*.parquet") if not p.name.startswith(".")] if folder.is_dir() else []


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(c) for c in path.read_text().split()] if path.exists() else []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in _proc_state(pid)


def _proc_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "Z"


def _start_and_kill_midway(out: Path) -> tuple[int, list[int]]:
    """Run the CLI in a subprocess, SIGKILL it once a few points are stored; return (parts at kill, its workers)."""
    command = [sys.executable, "-m", "sim", "sweep", *GRID_4X4, *WORKLOAD, "--workers", "1", "--out", str(out),
               "--no-plots"]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + WAIT_LIMIT_S
    while len(_parts(out)) < KILL_AFTER_N_PARTS and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    workers = _children(process.pid)
    process.send_signal(signal.SIGKILL)
    process.wait()
    n_parts = len(_parts(out))
    assert process.returncode == -signal.SIGKILL, process.stderr.read().decode()[-2000:]
    return n_parts, workers


def test_kill_9_midway_then_rerun_ends_with_exactly_16_rows(tmp_path):
    out = tmp_path / "sweep"
    n_parts_at_kill, workers = _start_and_kill_midway(out)
    assert KILL_AFTER_N_PARTS <= n_parts_at_kill < 16
    if (out / "results.parquet").exists():  # whatever was consolidated is whole and duplicate-free
        partial = pd.read_parquet(out / "results.parquet")
        assert partial["point_id"].is_unique and len(partial) <= n_parts_at_kill
    deadline = time.monotonic() + 10
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(w) for w in workers), "orphaned workers must exit with their sweep"

    result = CliRunner().invoke(app, ["sweep", *GRID_4X4, *WORKLOAD, "--workers", "2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert f"{n_parts_at_kill} of 16 points already finished" in result.output
    assert f"({16 - n_parts_at_kill} run now, {n_parts_at_kill} from before)" in result.output
    frame = pd.read_parquet(out / "results.parquet")
    assert len(frame) == 16 and frame["point_id"].is_unique and len(_parts(out)) == 16
    pairs = set(zip(frame["max_num_seqs"], frame["block_size"], strict=True))
    assert pairs == set(itertools.product([32, 64, 128, 256], [16, 32, 64, 128]))
    assert (frame["n_finished"] == 300).all() and (frame["qps"] == 20.0).all()
    for name in ("sweep_max_num_seqs.png", "sweep_block_size.png", "heatmap_request_throughput.png",
                 "heatmap_ttft_s_p99.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # the rows equal a point simulated here in-process (what was stored before the kill and after)
    points = expand(load_base(None)[0], {"max_requests": 300},  # the CLI's base: plan's engine preset
                    parse_grid(["max_num_seqs=32,256", "block_size=16", "qps=20"]))
    assert all(point.config["engine"] == "vllm" for point in points)
    for point in points:
        expected = run_point(point)
        stored = frame.set_index("point_id").loc[point.point_id]
        for metric in ("ttft_s_p99", "tpot_s_mean", "request_throughput", "num_gpu_blocks", "preemptions"):
            assert stored[metric] == expected[metric], metric

    again = CliRunner().invoke(app, ["sweep", *GRID_4X4, *WORKLOAD, "--out", str(out), "--no-plots"])
    assert again.exit_code == 0 and "16 of 16 points already finished" in again.output
    assert len(pd.read_parquet(out / "results.parquet")) == 16


@pytest.mark.parametrize("args, words", [
    (["--grid", "max_batch=8,16"], "error: --grid: max_batch: unknown parameter; one of"),
    (["--grid", "max_num_seqs="], "error: --grid: max_num_seqs: empty value"),
    (["--grid", "x"], "error: --grid: 'x' is not key=v1,v2"),
    (["--grid", "max_num_seqs=abc"], "error: --grid: max_num_seqs: Input should be a valid integer"),
    ([], "error: --grid: give at least one"),
    (["--grid", "block_size=16", "--workers", "0"], "error: --workers: must be at least 1"),
    (["--grid", "block_size=16", "--backend", "dask"], "error: --backend: 'dask'; one of local, ray"),
    (["--grid", "block_size=16", "--address", "auto"], "error: --address: only with --backend ray"),
    (["--grid", "block_size=16", "--base", "missing.yaml"], "error: missing.yaml: cannot read file"),
    (["--grid", "block_size=16", "--max-requests", "0"], "error: --max-requests: must be in [1, 100,000,000]"),
])
def test_bad_sweep_input_is_one_line_and_exit_2(tmp_path, args, words):
    result = CliRunner().invoke(app, ["sweep", *args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(words), result.stderr
    assert "Traceback" not in result.output
    assert not (tmp_path / "out" / "results.parquet").exists()


def test_a_missing_trace_fails_in_the_worker_as_one_line(tmp_path):
    result = CliRunner().invoke(app, ["sweep", "--grid", "block_size=16,32", "--trace", str(tmp_path / "no.csv"),
                                      "--workers", "1", "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ") and len(result.stderr.strip().splitlines()) == 1
