"""SLO units: a bare number is milliseconds (vLLM's convention) in simulate, sweep and plan alike;
implausible limits are refused with one line; vLLM's `--goodput ttft:2000 tpot:50` means the same.

Regression (issue 25): `plan --slo ttft_p99=2000 --slo tpot_p99=100` used to read 2000 SECONDS and
recommend a cluster whose P99 TTFT was 55 s as "100% of requests within all SLOs"."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.errors import InputError
from sim.inputs.slo import describe_slo, parse_slo

runner = CliRunner()
PLAN = ["plan", "--workload", "splitwise_conv", "--model", "llama-3-8b", "--max-requests", "120", "--workers", "1",
        "-H", "h100-sxm", "--tp", "1", "-p", "chunked", "--target-qps", "5"]


def test_bare_numbers_are_milliseconds_and_units_agree():
    same = [parse_slo(["ttft_p99=2000", "tpot_p99=50"]), parse_slo(["ttft_p99=2000ms", "tpot_p99=0.05s"]),
            parse_slo(["ttft_p99=2s", "tpot_p99=50ms"]), parse_slo([], goodput_pairs=["ttft:2000", "tpot:50"]),
            parse_slo([], goodput_pairs=["ttft:2000 tpot:50"])]
    assert {json.dumps(s.to_dict()) for s in same} == {json.dumps({"limits_s": {"ttft_p99": 2.0, "tpot_p99": 0.05},
                                                                   "goodput_min": 0.99})}
    assert describe_slo(same[0]) == "TTFT P99 \u2264 2.0 s, TPOT P99 \u2264 50 ms; \u2265 99% of requests finish"
    assert parse_slo([], goodput_pairs=["e2el:30000"]).to_dict()["limits_s"] == {"e2e_p99": 30.0}


@pytest.mark.parametrize("text, needle", [
    ("ttft_p99=2", "'2' is 2 ms: implausible for a TTFT limit (allowed 10 ms to 3600 s); bare numbers are "
                   "milliseconds (as in vLLM): for seconds write 2s"),
    ("tpot_p99=0.1", "for seconds write 0.1s"), ("e2e_p90=30", "for seconds write 30s"),
    ("ttft_p99=2ms", "implausible for a TTFT limit"), ("tpot_p99=5000s", "implausible for a TPOT limit"),
])
def test_implausible_limits_are_refused(text, needle):
    with pytest.raises(InputError, match="implausible") as info:
        parse_slo([text])
    assert needle in info.value.line()
    if text.endswith("s"):  # a unit was given: no hint about bare numbers
        assert "bare numbers" not in info.value.line()


def test_vllm_pairs_refuse_other_names():
    with pytest.raises(InputError, match="NAME:MS"):
        parse_slo([], goodput_pairs=["itl:50"])


@pytest.mark.parametrize("command", [
    PLAN + ["--slo", "ttft_p99=2"],
    ["simulate", "--max-requests", "20", "--slo", "ttft_p99=2"],
    ["sweep", "--grid", "max_num_seqs=8", "--max-requests", "20", "--slo", "ttft_p99=2"],
])
def test_every_command_refuses_a_bare_seconds_number_in_one_line(command, tmp_path):
    result = runner.invoke(app, command + (["--out", str(tmp_path / "o")] if command[0] == "sweep" else []))
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "for seconds write 2s" in lines[0]
    assert not (tmp_path / "o").exists()


def test_goodput_is_not_the_finished_share():
    result = runner.invoke(app, ["simulate", "--max-requests", "20", "--goodput", "0.9"])
    assert result.exit_code == 2 and "--min-finished" in result.output
    stray = runner.invoke(app, ["simulate", "--max-requests", "20", "stray"])
    assert stray.exit_code == 2 and "unexpected argument" in stray.output


def test_plan_reads_ms_prints_the_slos_first_and_meets_them():
    """The regression: 2000 and 100 are ms; the recommendation's own P99s are within 2 s and 100 ms."""
    slo_flags = runner.invoke(app, PLAN + ["--slo", "ttft_p99=2000", "--slo", "tpot_p99=100", "--max-verify-runs",
                                           "3"])
    assert slo_flags.exit_code == 0, slo_flags.output
    assert slo_flags.output.startswith("SLOs: TTFT P99 \u2264 2.0 s, TPOT P99 \u2264 100 ms; \u2265 99% of requests")
    vllm = runner.invoke(app, PLAN + ["--goodput", "ttft:2000", "tpot:100", "--max-verify-runs", "3", "--json"])
    assert vllm.exit_code == 0, vllm.output
    plan = json.loads(vllm.stdout)
    assert plan["slo"]["limits_s"] == {"ttft_p99": 2.0, "tpot_p99": 0.1}
    run = plan["recommended"]["verified_run"]
    assert run["passes"] and run["p99_s"]["ttft"] <= 2.0 and run["p99_s"]["tpot"] <= 0.1


def test_simulate_and_sweep_judge_the_same_limits(tmp_path):
    sim = runner.invoke(app, ["simulate", "--max-requests", "30", "--slo", "ttft_p99=2000", "--goodput", "tpot:50",
                              "--json"])
    assert sim.exit_code == 0, sim.output
    assert json.loads(sim.stdout)["slo_attainment"]["limits_s"] == {"ttft_p99": 2.0, "tpot_p99": 0.05}
    sweep = runner.invoke(app, ["sweep", "--grid", "max_num_seqs=8", "--max-requests", "30", "--goodput",
                                "ttft:2000", "tpot:50", "--out", str(tmp_path / "sw"), "--no-plots", "--workers", "1"])
    assert sweep.exit_code == 0, sweep.output
    assert "SLOs: TTFT P99 \u2264 2.0 s, TPOT P99 \u2264 50 ms" in sweep.output
