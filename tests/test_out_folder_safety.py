"""`--out D` never loses a user's file (issue 26): every name a run did not write is foreign, dot
files included; D may not be the working folder or above it; a mount point is written in place
(per-file renames, a completion marker); files beside the folder (--csv) are written inside the
same atomic step; SIGINT/SIGTERM leave D as it was with one line and exit 130/143; files get
the user's normal permissions."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import sim.run.folder
import sim.run.invoke
from sim.cli import app
from sim.run.folder import MARKER

ROOT = Path(__file__).resolve().parents[1]
TRACE = "arrival_s,prompt_tokens,output_tokens\n0.0,100,10\n0.5,200,20\n1.0,50,5\n"

RUN_NAMES = ["bench_serve.json", "requests.parquet", "summary.json"]  # what a run folder holds, sorted
RUN_NAMES_WITH_STEPS = ["bench_serve.json", "requests.parquet", "steps.parquet", "summary.json"]


def simulate(*argv: str):
    return CliRunner().invoke(app, ["simulate", "--json", *argv])


def snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def trace(tmp_path) -> Path:
    path = tmp_path / "t.csv"
    path.write_text(TRACE)
    return path


def test_dot_files_are_foreign(tmp_path, trace):
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    (project / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (project / ".env").write_text("TOKEN=secret\n")
    before = snapshot(project)
    result = simulate("-t", str(trace), "-o", str(project))
    assert result.exit_code == 2 and "not from a run (.env, .git)" in result.stderr
    assert snapshot(project) == before


def test_a_hidden_file_a_run_folder_gained_is_kept(tmp_path, trace):
    out = tmp_path / "run"
    assert simulate("-t", str(trace), "-o", str(out)).exit_code == 0
    (out / ".ipynb_checkpoints").mkdir()
    (out / ".ipynb_checkpoints" / "notes.ipynb").write_text("{}")
    before = snapshot(out)
    result = simulate("-t", str(trace), "-o", str(out), "--seed", "3")
    assert result.exit_code == 2 and ".ipynb_checkpoints" in result.stderr
    assert snapshot(out) == before


@pytest.mark.parametrize("relative", [".", "..", "../.."])
def test_the_working_folder_and_its_ancestors_are_refused(tmp_path, trace, monkeypatch, relative):
    home = tmp_path / "home" / "me"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("key")
    monkeypatch.chdir(home)
    before = snapshot(tmp_path)
    result = simulate("-t", str(trace), "-o", relative)
    assert result.exit_code == 2 and "working folder" in result.stderr, result.stderr
    assert snapshot(tmp_path) == before


def test_empty_folder_and_earlier_run_are_replaced(tmp_path, trace):
    out = tmp_path / "run"
    out.mkdir()
    assert simulate("-t", str(trace), "-o", str(out)).exit_code == 0
    assert simulate("-t", str(trace), "-o", str(out), "--record-steps").exit_code == 0
    assert sorted(p.name for p in out.iterdir()) == RUN_NAMES_WITH_STEPS


@pytest.fixture
def as_mount_point(monkeypatch):
    """Make every existing folder look like a mount point (the in-place publish path)."""
    monkeypatch.setattr(sim.run.folder.os.path, "ismount", lambda path: Path(path).is_dir())


def test_in_place_publish_renames_each_file_and_marks_the_folder(tmp_path, trace, as_mount_point):
    out = tmp_path / "volume"
    out.mkdir()
    assert simulate("-t", str(trace), "-o", str(out), "--record-steps").exit_code == 0
    assert json.loads((out / MARKER).read_text()) == {"files": RUN_NAMES_WITH_STEPS}
    assert simulate("-t", str(trace), "-o", str(out), "--seed", "5").exit_code == 0
    assert sorted(p.name for p in out.iterdir()) == [MARKER, *RUN_NAMES]  # old steps gone
    assert json.loads((out / "summary.json").read_text())["seed"] == 5
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # nothing staged beside it


def test_in_place_failure_leaves_the_folder_as_it_was(tmp_path, trace, as_mount_point, monkeypatch):
    out = tmp_path / "volume"
    out.mkdir()
    assert simulate("-t", str(trace), "-o", str(out)).exit_code == 0
    before = snapshot(out)

    def disk_full(path, data):
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(sim.run.invoke, "write_json", disk_full)
    result = simulate("-t", str(trace), "-o", str(out), "--seed", "5")
    assert result.exit_code == 2 and "No space left on device" in result.stderr
    assert snapshot(out) == before


def test_a_real_tmpfs_mount_point(tmp_path, trace):
    """In a private mount namespace (unshare -rm): a tmpfs at --out, written twice."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare")
    volume = tmp_path / "volume"
    volume.mkdir()
    python = f"env PYTHONPATH={ROOT} {sys.executable} -m sim simulate --json -t {trace} -o {volume}"
    script = (f"mount -t tmpfs tmpfs {volume} || exit 77; {python} --record-steps >/dev/null && {python} --seed 4 "
              f">/dev/null && ls -A {volume} && cat {volume}/summary.json")
    done = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=120)
    if done.returncode == 77 or "unshare failed" in done.stderr or "Operation not permitted" in done.stderr:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    names, summary = done.stdout.split("{", 1)
    assert names.split() == [MARKER, *RUN_NAMES]
    assert json.loads("{" + summary)["seed"] == 4


def test_csv_that_cannot_be_written_is_refused_before_the_run(tmp_path, trace):
    out = tmp_path / "run"
    assert simulate("-t", str(trace), "-o", str(out)).exit_code == 0
    (tmp_path / "table.csv").mkdir()
    before = snapshot(tmp_path)
    result = simulate("-t", str(trace), "-o", str(out), "--seed", "4", "--csv", str(tmp_path / "table.csv"))
    assert result.exit_code == 2 and result.stderr.startswith("error: --csv:"), result.stderr
    assert snapshot(tmp_path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["run", "t.csv", "table.csv"]


def test_csv_failing_while_written_publishes_nothing(tmp_path, trace, monkeypatch):
    out = tmp_path / "run"
    assert simulate("-t", str(trace), "-o", str(out)).exit_code == 0
    before = snapshot(tmp_path)

    def fail(stage, csv_path, output):
        stage(csv_path, lambda tmp: (_ for _ in ()).throw(OSError(28, "No space left on device", tmp)))

    monkeypatch.setattr(sim.run.invoke, "_stage_csv", fail)
    result = simulate("-t", str(trace), "-o", str(out), "--seed", "4", "--csv", str(tmp_path / "r.csv"))
    assert result.exit_code == 2
    assert result.stderr == f"error: {tmp_path / 'r.csv'}: No space left on device\n"  # the user's path, no temp
    assert snapshot(tmp_path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["run", "t.csv"]


def test_csv_is_written_with_the_run(tmp_path, trace):
    result = simulate("-t", str(trace), "-o", str(tmp_path / "run"), "--csv", str(tmp_path / "r.csv"))
    assert result.exit_code == 0
    assert (tmp_path / "r.csv").read_text().count("\n") == 4  # header + 3 requests


def test_files_get_normal_permissions(tmp_path, trace):
    old = os.umask(0o022)
    try:
        assert simulate("-t", str(trace), "-o", str(tmp_path / "run"), "--csv", str(tmp_path / "r.csv")).exit_code == 0
        spec = ROOT / "workloads" / "multiturn_chat.yaml"
        sample = CliRunner().invoke(app, ["workload", "sample", str(spec), "--out", str(tmp_path / "s.jsonl")])
        assert sample.exit_code == 0, sample.output
    finally:
        os.umask(old)
    modes = {p.name: p.stat().st_mode & 0o777 for p in [*tmp_path.rglob("*")] if p.name != "t.csv"}
    assert modes == {"run": 0o755, "bench_serve.json": 0o644, "requests.parquet": 0o644, "summary.json": 0o644,
                     "r.csv": 0o644, "s.jsonl": 0o644}


def _workers_of(pid: int) -> list[int]:
    """Ids of the spawned worker processes whose parent is `pid` (Linux /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == pid and b"spawn_main" in cmdline:
            found.append(int(stat.parent.name))
    return found


def _run_and_signal(tmp_path: Path, out: Path, signum: int, *extra: str) -> subprocess.CompletedProcess:
    """`python -m sim simulate` of a long run into `out`, sent `signum` once its staging folder exists
    (with `--workers`: sent to the whole process group, as a terminal's Ctrl-C is, once they run)."""
    command = [sys.executable, "-m", "sim", "simulate", "--bench", "requests=3000000,isl=100,osl=100", "-o", str(out),
               "--json", *extra]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while process.poll() is None and time.monotonic() < deadline:
        ready = list(out.parent.glob(f".{out.name}.partial-*")) and (not extra or len(_workers_of(process.pid)) >= 2)
        if ready:
            time.sleep(0.5 if extra else 0.3)
            os.killpg(process.pid, signum)
            break
        time.sleep(0.02)
    stderr = process.communicate(timeout=60)[1]
    return subprocess.CompletedProcess(command, process.returncode, "", stderr)


@pytest.mark.parametrize("signum, code, extra", [(signal.SIGTERM, 143, ()), (signal.SIGINT, 130, ()),
                                                 (signal.SIGINT, 130, ("--replicas", "4", "--workers", "2"))],
                         ids=["SIGTERM", "SIGINT", "SIGINT-to-workers-too"])
def test_a_signal_leaves_the_folder_as_it_was(tmp_path, trace, signum, code, extra):
    out = tmp_path / "run"
    assert simulate("-t", str(trace), "-o", str(out)).exit_code == 0
    before = snapshot(tmp_path)
    done = _run_and_signal(tmp_path, out, signum, *extra)
    assert done.returncode == code, done.stderr
    assert done.stderr.strip() == f"error: interrupted; {out} left as it was"
    assert snapshot(tmp_path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["run", "t.csv"]


def test_a_folder_that_cannot_be_renamed_falls_back_to_the_in_place_publish(tmp_path, trace, monkeypatch):
    """A bind mount is not always recognised as a mount point: the exchange fails with EBUSY and
    the staged files are copied in, one atomic rename each, under the completion marker."""
    out = tmp_path / "volume"
    assert simulate("-t", str(trace), "-o", str(out), "--record-steps").exit_code == 0

    def busy(a, b):
        raise OSError(16, "Device or resource busy", str(b))

    monkeypatch.setattr(sim.run.folder, "_exchange", busy)
    assert simulate("-t", str(trace), "-o", str(out), "--seed", "6").exit_code == 0
    assert sorted(p.name for p in out.iterdir()) == [MARKER, *RUN_NAMES]
    assert json.loads((out / "summary.json").read_text())["seed"] == 6
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_killed_in_place_run_is_cleaned_up_by_the_next(tmp_path, trace, as_mount_point):
    out = tmp_path / "volume"
    out.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = out / f".infersim-partial-{int(dead.stdout)}-abc"
    stale.mkdir()
    (stale / "summary.json").write_text("{half")
    assert simulate("-t", str(trace), "-o", str(out)).exit_code == 0
    assert sorted(p.name for p in out.iterdir()) == [MARKER, *RUN_NAMES]
