"""Run folders are replaced whole: a reader never sees files of two runs side by side, a killed or
failed run leaves the earlier folder as it was, and the next run removes what a killed one left."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

import sim.run.folder
import sim.run.invoke
from sim.cli import app
from sim.errors import InputError
from sim.run.folder import atomic_run_dir, remove_stale_partials

ROOT = Path(__file__).resolve().parents[1]
OLD_N, NEW_N = 40, 2500


def simulate(out: Path, n: int, *extra: str):
    return CliRunner().invoke(app, ["simulate", "--max-requests", str(n), "-o", str(out), "--json", *extra])


def assert_whole_run(out: Path) -> int:
    """The folder holds ONE run: summary, requests (and steps iff recorded) agree; returns its n_requests."""
    summary = json.loads((out / "summary.json").read_text())
    n = summary["n_requests"]
    assert len(pd.read_parquet(out / "requests.parquet")) == n
    if (out / "steps.parquet").exists():
        assert len(pd.read_parquet(out / "steps.parquet")) == summary["n_steps"]
    assert n in (OLD_N, NEW_N)
    assert (out / "steps.parquet").exists() == (n == NEW_N)  # only the new run records steps
    return n


def partials(out: Path) -> list[Path]:
    return sorted(out.parent.glob(f".{out.name}.*"))


@pytest.fixture
def old_run(tmp_path):
    out = tmp_path / "run"
    assert simulate(out, OLD_N).exit_code == 0
    return out


def test_rerun_replaces_the_folder_whole(old_run):
    before = (old_run / "summary.json").read_text()
    result = simulate(old_run, 60)
    assert result.exit_code == 0, result.output
    assert json.loads((old_run / "summary.json").read_text())["n_requests"] == 60 != json.loads(before)["n_requests"]
    assert sorted(p.name for p in old_run.iterdir()) == ["bench_serve.json", "requests.parquet", "summary.json"]
    assert partials(old_run) == []


def test_failure_while_writing_keeps_the_old_folder(old_run, monkeypatch):
    before = {p.name: p.read_bytes() for p in old_run.iterdir()}

    def disk_full(path, data):
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(sim.run.invoke, "write_json", disk_full)  # requests.parquet is written, then this fails
    result = simulate(old_run, 60)
    assert result.exit_code == 2
    assert result.stderr == f"error: {old_run / 'summary.json'}: No space left on device\n"  # the user's path
    assert {p.name: p.read_bytes() for p in old_run.iterdir()} == before
    assert partials(old_run) == []


def test_without_an_atomic_exchange_the_folder_is_still_replaced_whole(old_run, monkeypatch):
    monkeypatch.setattr(sim.run.folder, "_exchange", lambda a, b: False)
    assert simulate(old_run, 60).exit_code == 0
    assert json.loads((old_run / "summary.json").read_text())["n_requests"] == 60
    assert partials(old_run) == []


def test_stale_partials_of_dead_runs_are_removed_live_ones_kept(tmp_path):
    out = tmp_path / "run"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".run.partial-{int(dead.stdout)}-abc"
    live = tmp_path / f".run.partial-{os.getppid()}-def"  # our parent process is alive
    for folder in (stale, live):
        folder.mkdir()
        (folder / "requests.parquet").write_bytes(b"half")
    assert remove_stale_partials(out) == [stale]
    assert not stale.exists() and live.exists()


def test_folder_with_foreign_files_is_refused_before_any_work(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="not from a run"), atomic_run_dir(tmp_path, ["summary.json"]):
        pytest.fail("the body must not run")
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_new_parent_folders_are_removed_when_the_run_fails(tmp_path):
    with pytest.raises(RuntimeError), atomic_run_dir(tmp_path / "a" / "b" / "run", []) as tmp_dir:
        (tmp_dir / "summary.json").write_text("{}")
        raise RuntimeError("simulation failed")
    assert list(tmp_path.iterdir()) == []


def _start_new_run(out: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "sim", "simulate", "--max-requests", str(NEW_N), "--record-steps",
               "-o", str(out), "--json"]
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _kill_when(process: subprocess.Popen, ready, timeout_s: float = 120.0) -> bool:
    """kill -9 `process` as soon as `ready()` holds; False if it ended first."""
    deadline = time.monotonic() + timeout_s
    while process.poll() is None and time.monotonic() < deadline:
        if ready():
            process.send_signal(signal.SIGKILL)
            process.wait()
            return True
        time.sleep(0.001)
    process.wait()
    return False


def _partial_has_files(out: Path) -> bool:
    return any(any(p.iterdir()) for p in partials(out) if p.is_dir())


def test_kill_9_mid_run_and_mid_write_never_mixes_two_runs(old_run):
    """`python -m sim simulate` over an earlier run's folder, killed -9 while simulating and again
    the moment its first file lands: the folder always holds one whole run (old or new); the kill's
    leftovers are removed by the next run, which replaces the folder whole."""
    old_summary = (old_run / "summary.json").read_bytes()
    assert _kill_when(_start_new_run(old_run), lambda: bool(partials(old_run))), "ended before the kill"
    assert (old_run / "summary.json").read_bytes() == old_summary  # killed mid-run: the old run, untouched
    assert_whole_run(old_run)
    assert partials(old_run), "a killed run leaves its temporary folder (removed by the next run)"
    _kill_when(_start_new_run(old_run), lambda: _partial_has_files(old_run))  # mid-write (or just after the swap)
    if assert_whole_run(old_run) == OLD_N:
        assert (old_run / "summary.json").read_bytes() == old_summary
    assert simulate(old_run, 60).exit_code == 0
    assert json.loads((old_run / "summary.json").read_text())["n_requests"] == 60
    assert partials(old_run) == []  # the killed runs' temporary folders are gone


def test_reruns_over_the_same_folder_are_byte_identical(tmp_path):
    """Determinism through the atomic writer: the same run twice over one folder gives the same
    bytes (summary.json apart from its reported wall time)."""
    out = tmp_path / "run"

    def files() -> dict:
        result = simulate(out, 80, "--record-steps", "--seed", "3", "--router", "random", "--replicas", "2")
        assert result.exit_code == 0, result.output
        summary = json.loads((out / "summary.json").read_text())
        summary.pop("wall_time_s")
        return {"summary": summary, **{p.name: p.read_bytes() for p in out.glob("*.parquet")}}

    first, second = files(), files()
    assert first.keys() == {"summary", "requests.parquet", "steps.parquet"}
    assert first == second
