"""Printed times and sizes in human units (issue 45 item 4): one formatter for durations and bytes, the
negative-headroom warning, MLA KV per token in KiB, progress lines on stderr."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.cli.common import ProgressLines, console
from sim.cli.plan_report import print_trust
from sim.run.human_units import bytes_text, duration_text, ms_text


@pytest.mark.parametrize(("seconds", "text"), [
    (21.1, "21.1 s"), (8.5e-4, "850 us"), (0.0355, "35.5 ms"), (300, "5.00 min"), (9000, "2.50 h"), (0, "0 s"),
    (None, "-"), (float("nan"), "-"),
])
def test_durations(seconds, text):
    assert duration_text(seconds) == text


def test_plan_p99_in_ms_prints_in_seconds():
    assert ms_text(2.11e4) == "21.1 s" and ms_text(None) == "-"


@pytest.mark.parametrize(("n_bytes", "text"), [
    (576, "576 B"), (70272, "68.6 KiB"), (1.5 * 2**20, "1.50 MiB"), (76.6 * 2**30, "76.6 GiB"), (0, "0 B"),
])
def test_bytes(n_bytes, text):
    assert bytes_text(n_bytes) == text


def test_mla_kv_per_token_is_not_zero_gib():
    result = CliRunner().invoke(app, ["memory", "--model", "deepseek-v3", "--hardware", "h200", "--tp", "8"])
    assert result.exit_code == 0, result.output
    line = next(row for row in result.stdout.splitlines() if "kv_bytes_per_token_per_gpu" in row)
    assert "KiB" in line and "0.00 GiB" not in result.stdout


def test_negative_headroom_is_a_warning_line():
    best = {"headroom": {"estimated_capacity_qps": 16.0, "estimated_headroom": -0.2}}
    with console.capture() as captured:
        print_trust(None, best)
    lines = captured.get().splitlines()
    assert "-20% over the target" in lines[0]
    assert lines[1].startswith("warning: negative headroom: these replicas are estimated to sustain 20% less")
    with console.capture() as captured:
        print_trust(None, {"headroom": {"estimated_capacity_qps": 24.0, "estimated_headroom": 0.2}})
    assert "warning" not in captured.get()


def test_progress_lines_are_bounded_and_end_with_the_total(capsys):
    progress = ProgressLines("pool plan")
    for done in range(1, 1001):
        progress("sizing", done, 1000)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 11 and lines[0].startswith("pool plan: sizing: 1/1000, ")
    assert lines[-1].startswith("pool plan: sizing: 1000/1000, ")
    for done in range(1, 5):  # the same stage again, a batch of 4: shown afresh
        progress("sizing", done, 4)
    assert [line.split(",")[0] for line in capsys.readouterr().err.splitlines()] == [
        f"pool plan: sizing: {done}/4" for done in range(1, 5)]
    quiet = ProgressLines("pool plan", enabled=False)
    quiet("sizing", 1, 1)
    assert capsys.readouterr().err == ""
