"""`infersim day run` / `day plan` through typer's CliRunner (tiny days), and bad input."""

from __future__ import annotations

import json

import yaml
from typer.testing import CliRunner

from sim.cli import app

SPEC = {
    "workload": {"kind": "day", "duration_s": 240, "seed": 2, "chunk_s": 60, "tenants": [{
        "rate": {"base": {"kind": "diurnal", "peak_rps": 6, "trough_rps": 1, "peak_hour": 0.05}},
        "lengths": {"prompt": {"kind": "fixed", "value": 200}, "output": {"kind": "fixed", "value": 40}}}]},
    "engine": {"model": "llama-3.1-8b", "hardware": "h100-sxm", "engine": "vllm", "max_num_seqs": 4},
    "fleet": {"autoscaler": {"policy": {"kind": "target", "metric": "queue_length", "target": 2},
                             "interval_s": 10, "max_replicas": 4}},
    "slo": {"ttft_s": 1.0},
}


def write(tmp_path, spec=SPEC):
    path = tmp_path / "day.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_day_run_writes_the_run_folder(tmp_path):
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["day", "run", str(write(tmp_path)), "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert sorted(p.name for p in out.iterdir()) == ["day.png", "hours.csv", "replicas.csv", "summary.json",
                                                     "timeline.csv"]
    assert summary == json.loads((out / "summary.json").read_text())
    assert summary["n_arrived"] == summary["n_finished"] > 0 and len(summary["hours"]) == 1
    assert (out / "timeline.csv").read_text().splitlines()[0].startswith("t_s,ready,starting")


def test_day_plan_verifies_its_choice(tmp_path):
    result = CliRunner().invoke(app, ["day", "plan", str(write(tmp_path)), "--probe-s", "60", "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["capacity_rps_per_replica"] > 0 and plan["verified"]
    chosen = plan["chosen"]
    assert chosen is not None and chosen["name"] == plan["verified"][-1]["name"]
    assert plan["verified"][-1]["hours_meeting_target"] == plan["verified"][-1]["n_hours"]
    assert plan["with_failure_at_peak"] and all(run["failures"] == 1 for run in plan["with_failure_at_peak"])
    proof = plan["failure_proof_headroom"]
    if proof is not None:  # the replay that proved it met the target every hour
        last = plan["with_failure_at_peak"][-1]
        assert last["name"].endswith(f"headroom {proof}") and last["hours_meeting_target"] == last["n_hours"]


def test_bad_day_spec_is_one_line_and_exit_2(tmp_path):
    bad = {**SPEC, "fleet": {"autoscaler": {"policy": {"kind": "target", "metric": "gpu_temp", "target": 1}}}}
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["day", "run", str(write(tmp_path, bad)), "--out", str(out)])
    assert result.exit_code == 2 and not out.exists()
    assert len(result.stderr.strip().splitlines()) == 1 and "fleet.autoscaler.policy" in result.stderr


def test_screening_a_day_too_short_for_windows_is_one_line(tmp_path):
    result = CliRunner().invoke(app, ["day", "plan", str(write(tmp_path)), "--screen"])
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "--screen" in result.stderr and "6 h" in result.stderr
