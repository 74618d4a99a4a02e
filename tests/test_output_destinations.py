"""One output contract for every writer (issue 51, sim/run/destination.py): a dangerous destination
(`.`, `~`, `/`, an input, a folder of the user's files or dot-files, a symlink into another folder,
the run's own outputs) is refused before any work with one line naming the flag, and nothing
changes; the swap re-checks the folder (a file the user wrote meanwhile is kept); one writer per
destination; a killed run's staging siblings are removed by the next run there."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.errors import InputError
from sim.output import write_text
from sim.run.destination import FileOut, FolderOut, claim_outputs, lock_path
from sim.run.folder import atomic_run_dir

ROOT = Path(__file__).resolve().parents[1]
TRACE = "arrival_s,prompt_tokens,output_tokens\n0.0,100,10\n0.5,200,20\n1.0,50,5\n"
DAY_SPEC = ("workload: {kind: day, duration_s: 240, seed: 2, chunk_s: 60, tenants: [{rate: {base: {kind: diurnal, "
            "peak_rps: 6, trough_rps: 1, peak_hour: 0.05}}, lengths: {prompt: {kind: fixed, value: 200}, "
            "output: {kind: fixed, value: 40}}}]}\nengine: {model: llama-3.1-8b, hardware: h100-sxm, engine: vllm, "
            "max_num_seqs: 4}\nfleet: {autoscaler: {policy: {kind: target, metric: queue_length, target: 2}, "
            "interval_s: 10, max_replicas: 4}}\nslo: {ttft_s: 1.0}\n")
POOL_SPEC = "hardware: h100-sxm\nmodels: []\n"


def snapshot(folder: Path) -> dict:
    """Every entry under `folder` (links as their target text, files as bytes, folders as None)."""
    found = {}
    for path in sorted(folder.rglob("*")):
        key = str(path.relative_to(folder))
        found[key] = (os.readlink(path) if path.is_symlink() else path.read_bytes() if path.is_file() else None)
    return found


@pytest.fixture
def place(tmp_path, monkeypatch):
    """A working folder `work` with a trace and specs, HOME a temp folder with the user's files."""
    home = tmp_path / "home"
    (home / ".config").mkdir(parents=True)
    (home / ".bashrc").write_text("alias ll='ls -l'\n")
    monkeypatch.setenv("HOME", str(home))
    work = home / "work"
    work.mkdir()
    (work / "t.csv").write_text(TRACE)
    (work / "day.yaml").write_text(DAY_SPEC)
    (work / "pool.yaml").write_text(POOL_SPEC)
    (work / "m.csv").write_text("op,m,n,k,time_s\n")
    (work / "s.jsonl").write_text('{"arrival_s": 0, "prompt_tokens": 10, "output_tokens": 5}\n')
    mine = work / "mine"
    mine.mkdir()
    (mine / "plan.json").write_text('{"mine": true}\n')
    (mine / "results.parquet").write_text("the user's own\n")
    dots = work / "dots"
    dots.mkdir()
    (dots / ".env").write_text("TOKEN=1\n")
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "target").mkdir(parents=True)
    (work / "link").symlink_to(elsewhere / "target")
    for suffix in SUFFIXES:
        (elsewhere / f"target{suffix}").write_text("keep\n")
        (work / f"link{suffix}").symlink_to(elsewhere / f"target{suffix}")
        (work / f"dir{suffix}").mkdir()
    (work / "base.yaml").write_text("name: mine\n")
    (work / "prof.png").write_text("not really a png\n")
    monkeypatch.chdir(work)
    return tmp_path


# every writer: (command words before the destination, flag, a folder or file destination, words after)
FOLDER_WRITERS = {
    "simulate": (["simulate", "-t", "t.csv", "--json", "--out"], []),
    "sweep": (["sweep", "-t", "t.csv", "--grid", "max_num_seqs=4", "--no-plots", "--out"], []),
    "plan": (["plan", "--workload", "t.csv", "--slo", "ttft_p99=1s", "--target-qps", "1", "--out"], []),
    "plan --emit": (["plan", "--workload", "t.csv", "--slo", "ttft_p99=1s", "--target-qps", "1", "--emit", "k8s",
                     "--out"], []),
    "day run": (["day", "run", "day.yaml", "--out"], []),
    "day plan": (["day", "plan", "day.yaml", "--out"], []),
    "pool plan": (["pool", "plan", "pool.yaml", "--out"], []),
}
SUFFIXES = (".csv", ".jsonl", ".yaml", ".png")
FILE_WRITERS = {  # words before the destination, the input a test points it at (its suffix is the one wanted)
    "simulate --csv": (["simulate", "-t", "t.csv", "--json", "--csv"], "t.csv"),
    "workload sample": (["workload", "sample", "s.jsonl", "--out"], "s.jsonl"),
    "calibrate run": (["calibrate", "run", "--device", "cpu", "--base", "base.yaml", "--out"], "base.yaml"),
    "calibrate fit": (["calibrate", "fit", "m.csv", "--base", "base.yaml", "--out"], "base.yaml"),
    "calibrate report --plot": (["calibrate", "report", "prof.png", "m.csv", "--plot"], "prof.png"),
    "calibrate engine": (["calibrate", "engine", "m.csv", "--engine", "base.yaml", "--out"], "base.yaml"),
    "validate --per-request-out": (["validate", "s.jsonl", "--per-request-out"], "s.jsonl"),
}


def invoke(words: list[str]):
    return CliRunner().invoke(app, words)


def assert_refused(result, flag: str, root: Path, before: dict) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith(f"error: {flag}"), result.stderr
    assert snapshot(root) == before, "a refused destination changed something"


@pytest.mark.parametrize("command", list(FOLDER_WRITERS))
@pytest.mark.parametrize("case", [".", "~", "/", "user's files", "dot-files", "symlink elsewhere"])
def test_every_folder_writer_refuses_a_dangerous_folder_before_any_work(place, command, case):
    before = snapshot(place)
    head, tail = FOLDER_WRITERS[command]
    destination = {".": ".", "~": os.environ["HOME"], "/": "/", "user's files": "mine", "dot-files": "dots",
                   "symlink elsewhere": "link"}[case]
    assert_refused(invoke([*head, destination, *tail]), "--out", place, before)


@pytest.mark.parametrize("command", list(FILE_WRITERS))
@pytest.mark.parametrize("case", ["input", "folder", "/", "symlink elsewhere", "FIFO"])
def test_every_file_writer_refuses_a_dangerous_file_before_any_work(place, command, case):
    head, input_name = FILE_WRITERS[command]
    suffix = Path(input_name).suffix
    if case == "FIFO":
        os.mkfifo(f"fifo{suffix}")
    before = snapshot(place)
    destination = {"input": input_name, "folder": f"dir{suffix}", "/": "/", "symlink elsewhere": f"link{suffix}",
                   "FIFO": f"fifo{suffix}"}[case]
    result = invoke([*head, destination])
    assert_refused(result, head[-1], place, before)
    if case == "input":
        assert "is an input of this run" in result.stderr


def test_csv_into_the_runs_own_folder_is_refused_before_the_run(place):
    assert invoke(["simulate", "-t", "t.csv", "--json", "--out", "run"]).exit_code == 0
    before = snapshot(place)
    for own in ("run/summary.json", "run/requests.parquet", "run/new.csv"):
        assert_refused(invoke(["simulate", "-t", "t.csv", "--json", "--out", "run", "--csv", own]), "--csv",
                       place, before)


def test_an_input_inside_the_folder_a_run_replaces_is_refused(place):
    assert invoke(["simulate", "-t", "t.csv", "--json", "--out", "run"]).exit_code == 0
    before = snapshot(place)
    result = invoke(["simulate", "-t", "run/requests.parquet", "--json", "--out", "run"])
    assert_refused(result, "--out", place, before)
    assert "an input of this run" in result.stderr


def test_a_file_the_user_writes_during_the_run_stops_the_swap(tmp_path, monkeypatch):
    """The exchange, the two-rename fallback and the in-place publish all check D again."""
    import sim.run.folder as folder

    for way in ("exchange", "renames", "in place"):
        out = tmp_path / way.replace(" ", "_")
        with atomic_run_dir(out, ["summary.json"]) as tmp:
            write_text(tmp / "summary.json", "old\n")
        monkeypatch.setattr(folder, "_exchange", (lambda a, b: False) if way == "renames" else folder._exchange)
        if way == "in place":
            monkeypatch.setattr(folder.os.path, "ismount", lambda p, out=out: Path(p) == out)
        with (pytest.raises(InputError, match=r"gained files during the run \(notes.txt\)"),
              atomic_run_dir(out, ["summary.json"]) as tmp):
            write_text(tmp / "summary.json", "new\n")
            (out / "notes.txt").write_text("the user's\n")
        monkeypatch.undo()
        assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "summary.json"]
        assert (out / "summary.json").read_text() == "old\n" and (out / "notes.txt").read_text() == "the user's\n"
        assert [p.name for p in tmp_path.iterdir() if ".partial-" in p.name] == []


def test_a_second_writer_of_one_destination_is_refused(place):
    """What a running simulate holds (its claim) refuses a sweep, another simulate, a day run."""
    with claim_outputs([FolderOut("--out", Path("run"), ("summary.json",))]):
        assert lock_path(Path("run")).exists()
        before = snapshot(place)
        for words in (["sweep", "-t", "t.csv", "--grid", "max_num_seqs=4", "--out", "run"],
                      ["simulate", "-t", "t.csv", "--out", "run"], ["day", "run", "day.yaml", "--out", "run"]):
            result = invoke(words)
            assert_refused(result, "--out", place, before)
            assert f"another infersim command (pid {os.getpid()}) is writing" in result.stderr
    assert not lock_path(Path("run")).exists()  # released and removed when the command ends
    with claim_outputs(files=[FileOut("--csv", Path("r.csv"))]):
        result = invoke(["simulate", "-t", "t.csv", "--csv", "r.csv"])
        assert result.exit_code == 2 and "is writing" in result.stderr


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def test_the_staging_leftovers_of_a_dead_run_are_removed_by_the_next(place):
    dead, alive = _dead_pid(), os.getppid()
    (place / "home" / "work" / f".run.partial-{dead}-abc").mkdir()
    (place / "home" / "work" / f".run.partial-{alive}-abc").mkdir()
    (place / "home" / "work" / f".r.csv.partial-{dead}-xyz.csv").write_text("half")
    (place / "home" / "work" / f".r.csv.partial-{alive}-xyz.csv").write_text("someone's")
    assert invoke(["simulate", "-t", "t.csv", "--json", "--out", "run", "--csv", "r.csv"]).exit_code == 0
    left = sorted(p.name for p in (place / "home" / "work").iterdir() if ".partial-" in p.name)
    assert left == [f".r.csv.partial-{alive}-xyz.csv", f".run.partial-{alive}-abc"]
    assert not any(p.name.endswith(".lock") for p in (place / "home" / "work").iterdir())


def test_day_plan_writes_its_folder_whole(place):
    result = invoke(["day", "plan", "day.yaml", "--probe-s", "60", "--json", "--out", "plan"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in Path("plan").iterdir()) == ["plan.json"]
    assert json.loads(Path("plan/plan.json").read_text()) == json.loads(result.stdout)


def test_the_home_folder_is_refused_even_empty_and_from_elsewhere(tmp_path, monkeypatch):
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (work / "t.csv").write_text(TRACE)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    before = snapshot(tmp_path)
    for destination in (str(home), str(tmp_path)):  # the home folder, a folder holding it
        result = invoke(["simulate", "-t", "t.csv", "--out", destination])
        assert_refused(result, "--out", tmp_path, before)
        assert "root or home folder" in result.stderr


# long enough to be killed while working (they are stopped ~0.4 s after claiming their destination)
LONG_DAY = DAY_SPEC.replace("duration_s: 240", "duration_s: 86400").replace("peak_rps: 6", "peak_rps: 40")
LONG = {
    "plan": ["plan", "--workload", "splitwise_conv", "--slo", "ttft_p99=1s", "--target-qps", "2", "--workers", "1"],
    "day run": ["day", "run", "long.yaml", "--no-plot"],
    "day plan": ["day", "plan", "long.yaml", "--no-screen"],
    "sweep": ["sweep", "--trace", "splitwise_conv", "--grid", "max_num_seqs=8,16,32,64", "--workers", "1",
              "--no-plots"],
}


def _start_and_signal(words: list[str], out: Path, signum: int) -> subprocess.CompletedProcess:
    """`python -m sim WORDS --out OUT`, sent `signum` 0.4 s after it locked OUT (it is working then)."""
    command = [sys.executable, "-m", "sim", *words, "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(command, cwd=out.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=env, start_new_session=True)
    deadline = time.monotonic() + 60
    while process.poll() is None and not lock_path(out).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.4)
    assert process.poll() is None, f"{words[0]} ended before it could be stopped: {process.communicate()}"
    if signum == signal.SIGKILL:
        os.killpg(process.pid, signum)
    else:
        process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=60)
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def _sweep_is_whole(out: Path) -> None:
    """Finished points only, each whole; results.parquet (when there) is rows of them."""
    import pandas as pd

    parts = {p.stem: pd.read_parquet(p) for p in (out / "parts").glob("*.parquet")}
    assert all(len(frame) == 1 for frame in parts.values())
    if (out / "results.parquet").exists():
        assert set(pd.read_parquet(out / "results.parquet")["point_id"]) <= set(parts)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "kill-9"])
@pytest.mark.parametrize("command", list(LONG))
def test_a_stopped_writer_leaves_nothing_or_one_whole_run(tmp_path, command, signum):
    (tmp_path / "long.yaml").write_text(LONG_DAY)
    out = tmp_path / "out"
    done = _start_and_signal(LONG[command], out, signum)
    if signum == signal.SIGKILL:
        assert done.returncode == -signal.SIGKILL
    else:
        assert done.returncode == 143, done.stderr
        line = ("interrupted: finished points are kept" if command == "sweep" else "error: interrupted")
        assert done.stderr.strip().splitlines()[-1].startswith(line) and line not in done.stdout, done.stderr
    if command == "sweep":
        if out.exists():
            _sweep_is_whole(out)
    else:
        assert not out.exists(), "a stopped run published"
    leftovers = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".out."))
    if signum == signal.SIGTERM:
        assert leftovers == []  # unwound: staging and lock removed
        return
    assert all(n.startswith(".out.partial-") or n == ".out.lock" for n in leftovers), leftovers
    if command != "sweep":  # the next run there removes what the killed one left
        (tmp_path / "t.csv").write_text(TRACE)
        assert invoke(["simulate", "-t", str(tmp_path / "t.csv"), "--json", "--out", str(out)]).exit_code == 0
        assert sorted(p.name for p in tmp_path.iterdir()) == ["long.yaml", "out", "t.csv"]
        assert sorted(p.name for p in out.iterdir()) == ["bench_serve.json", "requests.parquet", "summary.json"]


def test_two_concurrent_runs_into_one_folder_leave_one_whole_run(tmp_path):
    """Both start at once: the second is refused (exit 2, one line), or they run one after the
    other; the folder ends as one whole run either way."""
    import pandas as pd

    command = [sys.executable, "-m", "sim", "simulate", "--bench", "requests=3000,isl=100,osl=100", "--json",
               "--out", str(tmp_path / "out")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    runs = [subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env) for _ in range(2)]
    results = [(run.wait(timeout=120), run.communicate()[1]) for run in runs]
    assert sorted(code for code, _ in results) in ([0, 0], [0, 2]), results
    for code, stderr in results:
        if code == 2:
            assert "another infersim command" in stderr and len(stderr.strip().splitlines()) == 1
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert len(pd.read_parquet(tmp_path / "out" / "requests.parquet")) == summary["n_requests"] == 3000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_new_nested_folder_is_locked_too_and_its_parents_go_if_unused(tmp_path):
    out = tmp_path / "runs" / "a" / "b"
    with claim_outputs([FolderOut("--out", out, ("summary.json",))]):
        assert lock_path(out).exists()
        with pytest.raises(InputError, match="is writing"), claim_outputs([FolderOut("--out", out, ("summary.json",))]):
            pass
    assert list(tmp_path.iterdir()) == []
