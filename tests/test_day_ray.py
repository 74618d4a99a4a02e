"""`infersim day run --ray` / `day plan --ray` against a local Ray cluster of 2 CPUs: the same run
folder and plan as without Ray (only wall times and the worker's figures differ); bad flags and an
unreachable --address are one line and exit 2, with nothing written."""

from __future__ import annotations

import json
import os

import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.fleet.replays import WORKER_KEYS
from tests.test_cli_day import write

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield
    ray.shutdown()


def _day_run(tmp_path, name: str, *flags: str) -> tuple[dict, dict]:
    out = tmp_path / name
    result = CliRunner().invoke(app, ["day", "run", str(write(tmp_path)), "--out", str(out), "--json", *flags])
    assert result.exit_code == 0, result.output
    files = {p.name: p.read_text() for p in out.iterdir() if p.suffix == ".csv"}
    return json.loads(result.stdout), files


def test_day_run_on_ray_writes_the_same_run_folder(tmp_path, local_ray):
    here, here_files = _day_run(tmp_path, "here")
    remote, remote_files = _day_run(tmp_path, "ray", "--ray")
    assert remote["worker"]["pid"] != os.getpid() == here["worker"]["pid"]
    assert remote["worker"]["peak_rss_mib"] > 0
    for key in WORKER_KEYS:
        here.pop(key), remote.pop(key)
    assert remote == here and remote["n_arrived"] > 0
    assert remote_files == here_files and set(here_files) == {"hours.csv", "timeline.csv", "replicas.csv"}


def test_day_plan_on_ray_is_the_local_plan(tmp_path, local_ray):
    plans = []
    for flags in ([], ["--ray", "--workers", "2"]):
        result = CliRunner().invoke(app, ["day", "plan", str(write(tmp_path)), "--probe-s", "60", "--json", *flags])
        assert result.exit_code == 0, result.output
        plan = json.loads(result.stdout)
        runs = plan["verified"] + plan["with_failure_at_peak"]
        plans.append((plan, {run["worker"]["pid"] for run in runs}))
        for run in runs:
            for key in WORKER_KEYS:
                run.pop(key)
        plan.pop("wall_time_s")
    (here, here_pids), (remote, remote_pids) = plans
    assert here_pids == {os.getpid()} and os.getpid() not in remote_pids
    assert remote == here and here["chosen"] is not None


@pytest.mark.parametrize("command, flags, field", [
    ("run", ["--ray", "--address", "127.0.0.1:1"], "--address"),  # nothing listens on port 1
    ("run", ["--address", "127.0.0.1:6379"], "--address"),  # an address without --ray
    ("plan", ["--ray", "--workers", "0"], "--workers"),
    ("plan", ["--workers", "2"], "--workers"),  # workers without --ray
])
def test_bad_ray_flags_are_one_line(tmp_path, command, flags, field):
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["day", command, str(write(tmp_path)), "--out", str(out), *flags])
    assert result.exit_code == 2, result.output
    assert len(result.stderr.strip().splitlines()) == 1 and field in result.stderr
    assert not out.exists()
