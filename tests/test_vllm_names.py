"""vLLM users at home (issue 25 item 3): vLLM's flag names and dashed YAML keys mean what they mean
in vLLM; --qps (Poisson, vLLM's --request-rate) and --trace-qps (the trace's own shape) are apart;
every run folder holds a `vllm bench serve`-shaped result."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.errors import InputError
from sim.inputs.vllm_names import policy_from_vllm_flags

runner = CliRunner()
METRICS = ("n_finished", "sim_duration_s", "ttft_s", "tpot_s", "e2e_s", "policy", "tp")


def _summary(args: list[str]) -> dict:
    result = runner.invoke(app, ["simulate", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("policy, prefix, chunked, expected", [
    (None, True, None, ("radix", True)), (None, True, False, ("radix", False)),
    (None, None, False, ("continuous", None)), (None, None, True, ("chunked", None)),
    ("continuous", True, None, ("radix", False)), ("chunked", True, None, ("radix", True)),
    (None, False, None, ("chunked", None)), ("radix", None, None, ("radix", None)),
])
def test_vllm_scheduler_switches_choose_the_policy(policy, prefix, chunked, expected):
    assert policy_from_vllm_flags(policy, prefix, chunked) == expected


@pytest.mark.parametrize("policy, prefix, chunked", [("static", True, None), ("chunked", None, False),
                                                     ("continuous", None, True), ("radix", False, None)])
def test_contradicting_switches_are_refused(policy, prefix, chunked):
    with pytest.raises(InputError, match="contradict --policy"):
        policy_from_vllm_flags(policy, prefix, chunked)


def test_vllm_flag_names_give_the_same_run():
    vllm = _summary(["--tensor-parallel-size", "2", "--num-prompts", "60", "--request-rate", "4",
                     "--enable-prefix-caching", "--kv-cache-dtype", "fp8"])
    ours = _summary(["--tp", "2", "--max-requests", "60", "--qps", "4", "--policy", "radix", "--kv-dtype", "fp8"])
    assert {k: vllm[k] for k in METRICS} == {k: ours[k] for k in METRICS}


def test_request_rate_inf_sends_everything_at_once():
    burst = _summary(["--num-prompts", "40", "--request-rate", "inf"])
    assert burst["n_requests"] == 40 and burst["queue_delay_s"]["max"] > 0


def test_dashed_yaml_keys_are_vllms(tmp_path):
    dashed, plain, both = tmp_path / "d.yaml", tmp_path / "p.yaml", tmp_path / "b.yaml"
    dashed.write_text("max-num-seqs: 8\ngpu-memory-utilization: 0.8\n")
    plain.write_text("max_num_seqs: 8\ngpu_memory_utilization: 0.8\n")
    both.write_text("max-num-seqs: 8\nmax_num_seqs: 16\n")
    a, b = _summary(["-c", str(dashed), "--max-requests", "30"]), _summary(["-c", str(plain), "--max-requests", "30"])
    assert a["config"]["max_num_seqs"] == 8 and {k: a[k] for k in METRICS} == {k: b[k] for k in METRICS}
    twice = runner.invoke(app, ["simulate", "-c", str(both), "--max-requests", "30"])
    assert twice.exit_code == 2 and "given twice" in twice.output


def test_qps_is_poisson_and_trace_qps_keeps_the_shape_in_simulate_and_sweep(tmp_path):
    import pandas as pd

    # a sweep without an engine runs plan's (vllm, sim/inputs/engines/default.py); simulate names it here
    poisson = _summary(["--qps", "6", "--max-requests", "80", "--engine", "vllm"])
    shaped = _summary(["--trace-qps", "6", "--max-requests", "80", "--engine", "vllm"])
    assert poisson["ttft_s"] != shaped["ttft_s"]  # two different arrival processes
    result = runner.invoke(app, ["sweep", "--grid", "qps=6", "--max-requests", "80", "--out", str(tmp_path / "a"),
                                 "--no-plots", "--workers", "1"])
    assert result.exit_code == 0, result.output
    shaped_sweep = runner.invoke(app, ["sweep", "--grid", "trace_qps=6", "--max-requests", "80", "--out",
                                       str(tmp_path / "b"), "--no-plots", "--workers", "1"])
    assert shaped_sweep.exit_code == 0, shaped_sweep.output
    row_a = pd.read_parquet(tmp_path / "a" / "results.parquet").iloc[0]
    row_b = pd.read_parquet(tmp_path / "b" / "results.parquet").iloc[0]
    assert row_a["ttft_s_p99"] == pytest.approx(poisson["ttft_s"]["p99"])
    assert row_b["ttft_s_p99"] == pytest.approx(shaped["ttft_s"]["p99"])


def test_run_folder_holds_a_vllm_bench_serve_result(tmp_path):
    result = runner.invoke(app, ["simulate", "--num-prompts", "80", "--request-rate", "3", "--goodput", "ttft:2000",
                                 "tpot:50", "-o", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    bench = json.loads((tmp_path / "run" / "bench_serve.json").read_text())
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert bench["completed"] == summary["n_finished"] and bench["num_prompts"] == 80
    assert bench["mean_ttft_ms"] == pytest.approx(summary["ttft_s"]["mean"] * 1e3)
    assert bench["p99_tpot_ms"] == pytest.approx(summary["tpot_s"]["p99"] * 1e3)
    assert bench["mean_itl_ms"] == pytest.approx(summary["itl_s"]["mean"] * 1e3)
    assert bench["p99_itl_ms"] == pytest.approx(summary["itl_s"]["p99"] * 1e3)
    assert bench["mean_e2el_ms"] == pytest.approx(summary["e2e_s"]["mean"] * 1e3)
    assert bench["request_goodput"] == pytest.approx(summary["goodput"]["request_throughput"])
    assert bench["total_token_throughput"] == pytest.approx(summary["output_throughput_tok_s"]
                                                            + summary["input_throughput_tok_s"])
    assert len(bench["ttfts"]) == len(bench["input_lens"]) == len(bench["errors"]) == 80


def test_plan_takes_engine_knob_flags():
    result = runner.invoke(app, ["plan", "--workload", "splitwise_conv", "--model", "llama-3-8b", "--max-requests",
                                 "60", "--workers", "1", "-H", "h100-sxm", "--tensor-parallel-size", "1", "-p",
                                 "chunked", "--target-qps", "4", "--slo", "ttft_p99=2s", "--no-verify", "--json",
                                 "--max-num-seqs", "64", "--long-prefill-token-threshold", "2048",
                                 "--block-size", "32"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["config"]["max_num_seqs"] == 64 and plan["config"]["chunk_size"] == 2048
    assert "--max-num-seqs 64" in plan["launch"]["command"] and "--long-prefill-token-threshold 2048" in \
        plan["launch"]["command"] and "--block-size 32" in plan["launch"]["command"]
