"""One output contract for every writer (issue 51, sim/run/destination.py): a dangerous destination
(`.`, `~`, `/`, an input, a folder of the user's files or dot-files, a symlink into another folder,
the run's own outputs) is refused before any work with one line naming the flag, and nothing
changes; the swap re-checks the folder (a file the user wrote meanwhile is kept); one writer per
destination; a killed run's staging siblings are removed by the next run there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
