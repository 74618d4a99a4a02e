"""The planner end to end on small fast settings: sanity of the answers, determinism, CLI, bad input."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.inputs.config import EngineConfig
from sim.inputs.workload import load_workload
from sim.planner.plan import SearchSettings, make_plan
from sim.planner.slo import parse_slo

runner = CliRunner()
SMALL = SearchSettings(max_requests=120, verify=False)  # the slice search alone; verification: test_plan_verify.py
BASE = EngineConfig(model="llama-3-8b")
# the first 120 requests of the bundled Azure conversation trace (workloads/, see its README)
SMALL_ARGS = ["--workload", "splitwise_conv", "--model", "llama-3-8b", "--max-requests", "120", "--workers", "1",
              "--no-verify"]


@pytest.fixture(scope="module")
def trace():
    return load_workload("splitwise_conv").take(range(120))


def plan_for(trace, target_qps, slo=("ttft_p99=1s", "tpot_p99=0.05s"), hardware=("h100-sxm", "a100-80g-sxm"),
             tps=(1, 2), workers=1):
    return make_plan(trace, BASE, list(hardware), list(tps), ["chunked"], parse_slo(list(slo)), target_qps,
                     SMALL, workers)


def by_label(plan) -> dict:
    return {(r["hardware"], r["tp"], r["policy"]): r for r in plan["candidates"]}


def test_plan_rows_follow_from_the_search(trace):
    plan = plan_for(trace, 20.0)
    rows = plan["candidates"]
    assert len(rows) == 4 and {k: v for k, v in plan["recommended"].items() if k != "headroom"} == rows[0]
    costs = [(r["cost_per_hour_usd"], r["gpus"]) for r in rows]
    assert costs == sorted(costs)
    price = {"h100-sxm": 2.69, "a100-80g-sxm": 1.39}  # hwprofiles cost_per_hour_usd
    for r in rows:
        assert r["replicas"] == math.ceil(20.0 / r["max_qps_per_replica"])
        assert r["gpus"] == r["replicas"] * r["tp"]
        assert r["cost_per_hour_usd"] == pytest.approx(r["gpus"] * price[r["hardware"]])
        tokens_per_hour = 20.0 * plan["mean_output_tokens"] * 3600
        assert r["usd_per_m_output_tokens"] == pytest.approx(r["cost_per_hour_usd"] / tokens_per_hour * 1e6)
        passing = [p["rate_qps"] for p in r["search_points"] if p["passes"]]
        failing = [p for p in r["search_points"] if not p["passes"]]
        assert max(passing) == r["max_qps_per_replica"]
        just_above = min(failing, key=lambda p: p["rate_qps"])
        assert just_above["rate_qps"] / r["max_qps_per_replica"] == pytest.approx(2 ** (1 / 16))
        if just_above["slo_passes"] and r["binding_slo"] == "steady_state":  # the SLOs held, the queue grew
            assert not just_above["steady"]["kept_up"]
        elif just_above["slo_passes"]:  # the SLOs held on the run, not on its upper confidence bound
            binding, limits_s = r["binding_slo"], {"ttft_p99": 1.0, "tpot_p99": 0.05}
            assert just_above["values_s"][binding] <= limits_s[binding] < just_above["upper_s"][binding]
        else:
            assert r["binding_slo"] == max(just_above["ratios"], key=just_above["ratios"].get)
    # a faster GPU and more TP sustain more per replica
    labels = by_label(plan)
    assert labels[("h100-sxm", 1, "chunked")]["max_qps_per_replica"] > labels[("a100-80g-sxm", 1, "chunked")][
        "max_qps_per_replica"]
    assert labels[("h100-sxm", 2, "chunked")]["max_qps_per_replica"] > labels[("h100-sxm", 1, "chunked")][
        "max_qps_per_replica"]


def test_higher_target_never_needs_fewer_gpus(trace):
    plans = [plan_for(trace, target) for target in (2.0, 9.0, 40.0)]
    for low, high in zip(plans, plans[1:], strict=False):
        assert high["recommended"]["cost_per_hour_usd"] >= low["recommended"]["cost_per_hour_usd"]
        for label, row in by_label(low).items():
            assert by_label(high)[label]["gpus"] >= row["gpus"]
    # (chunked budget = max_num_batched_tokens 8192: one H100 sustains ~45 req/s of this slice)
    one_kind = [plan_for(trace, target, hardware=("h100-sxm",)) for target in (2.0, 80.0)]
    assert one_kind[1]["recommended"]["gpus"] > one_kind[0]["recommended"]["gpus"]


def test_looser_slo_never_needs_more_gpus(trace):
    # 100 req/s: with the chunked budget at max_num_batched_tokens (8192) 20 req/s fits one GPU either way
    plans = [plan_for(trace, 100.0, slo=(f"ttft_p99={limit}s", "tpot_p99=0.05s")) for limit in (0.4, 1.0, 3.0)]
    for tight, loose in zip(plans, plans[1:], strict=False):
        assert loose["recommended"]["gpus"] <= tight["recommended"]["gpus"]
        for label, row in by_label(tight).items():
            assert by_label(loose)[label]["max_qps_per_replica"] >= row["max_qps_per_replica"]
            assert by_label(loose)[label]["gpus"] <= row["gpus"]
    # where the tight TTFT binds, the loose one sustains more; past the point where the queue stops keeping
    # up no TTFT limit buys more (sim.run.steady_state), so the H100 rows (cheapest) bind on steady state
    a100_tp2 = ("a100-80g-sxm", 2, "chunked")
    assert by_label(plans[0])[a100_tp2]["binding_slo"] == "ttft_p99"
    assert by_label(plans[-1])[a100_tp2]["max_qps_per_replica"] > by_label(plans[0])[a100_tp2]["max_qps_per_replica"]


def test_same_plan_with_one_or_two_workers(trace):
    assert plan_for(trace, 20.0, workers=2) == plan_for(trace, 20.0, workers=1)


def test_cli_writes_plan_json_and_plots(tmp_path):
    out = tmp_path / "plan"
    result = runner.invoke(app, ["plan", *SMALL_ARGS, "--slo", "ttft_p99=1s", "--slo", "tpot_p99=0.05s",
                                 "--hardware", "h100-sxm,h200", "--tp", "1,3", "--policy", "chunked,radix",
                                 "--target-qps", "20", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "recommended" in result.stdout and "skipped: h100-sxm tp3 chunked,radix: tp 3 must divide" in result.stdout
    plan = json.loads((out / "plan.json").read_text())
    keys = {"hardware", "tp", "policy", "max_qps_per_replica", "replicas", "gpus", "cost_per_hour_usd",
            "usd_per_m_output_tokens", "binding_slo"}
    # the workload has no prefix ids: radix candidates are chunked's twins, skipped (tests/test_plan_radix_twins.py)
    assert len(plan["candidates"]) == 2 and all(keys <= set(row) for row in plan["candidates"])
    assert {k: v for k, v in plan["recommended"].items() if k != "headroom"} == plan["candidates"][0]
    assert len(plan["skipped"]) == 6
    assert sum("no prefix ids" in s["reason"] for s in plan["skipped"]) == 2
    for name in ("latency_vs_rate.png", "cost.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temp files left
    as_json = runner.invoke(app, ["plan", *SMALL_ARGS, "--slo", "ttft_p99=1s", "--hardware", "h100-sxm", "--tp", "1",
                                  "--policy", "chunked", "--target-qps", "5", "--json"])
    assert json.loads(as_json.stdout)["recommended"]["hardware"] == "h100-sxm"


def assert_one_line_error(result, *needles: str) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert isinstance(result.exception, SystemExit), result.exception
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.mark.parametrize(("extra", "needles"), [
    (["--slo", "ttft_p97=1s"], ("--slo", "ttft_p97", "unknown SLO key", "ttft_p95")),
    (["--slo", "ttft_p99=1s", "--hardware", "h100-sxm,tpu-v9"], ("--hardware", "unknown profile 'tpu-v9'")),
    (["--slo", "ttft_p99=1s", "--policy", "fastest"], ("--policy", "fastest", "unknown policy")),
    (["--slo", "ttft_p99=1s", "--tp", "two"], ("--tp", "positive integers")),
    (["--slo", "ttft_p99=1s", "--target-qps", "0"], ("--target-qps", "(0, 1e+09]")),
    (["--slo", "ttft_p99=1s", "--model", "llama-3-70b", "--hardware", "a100-80g-sxm,h100-sxm", "--tp", "1"],
     ("no candidate can run", "a100-80g-sxm tp1: does not fit", "h100-sxm tp1: does not fit")),
])
def test_bad_input_is_one_line_exit_2(extra, needles):
    args = ["plan", *SMALL_ARGS, "--hardware", "h100-sxm", "--tp", "1", "--policy", "chunked", "--target-qps", "5"]
    assert_one_line_error(runner.invoke(app, args + extra), *needles)


def test_impossible_slo_is_one_line_exit_2():
    """10 ms is below the prefill of any prompt of the trace on these GPUs, so no rate meets it."""
    args = ["plan", *SMALL_ARGS, "--hardware", "h100-sxm,a100-80g-sxm", "--tp", "1,2", "--policy", "chunked",
            "--target-qps", "5", "--slo", "ttft_p99=10ms"]
    assert_one_line_error(runner.invoke(app, args), "--slo", "no candidate meets the SLOs even at 0.00781 qps",
                                 "closest: h100-sxm tp2 chunked, ttft_p99")


def test_kv_capacity_binds_when_prompts_outgrow_the_cache(tmp_path):
    config = tmp_path / "small_cache.yaml"
    config.write_text("num_gpu_blocks_override: 40\n")  # 640 tokens: most prompts never fit
    args = ["plan", *SMALL_ARGS, "--hardware", "h100-sxm", "--tp", "1", "--policy", "chunked", "--target-qps", "5",
            "--slo", "ttft_p99=5s", "--config", str(config)]
    assert_one_line_error(runner.invoke(app, args), "kv_capacity: only")
