"""The plan says what its numbers rest on and what they cost (issue 25, items 2 and 5):
extrapolations and validation coverage, $/M output and total tokens, whole nodes, --price, and the
cause when no rate meets the SLOs."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.errors import InputError
from sim.inputs.config import EngineConfig
from sim.planner.candidates import parse_prices
from sim.planner.trust import validation_coverage

runner = CliRunner()
PLAN = ["plan", "--workload", "splitwise_conv", "--model", "llama-3-8b", "--max-requests", "120", "--workers", "1",
        "-H", "h100-sxm,a100-80g-sxm", "--tp", "1", "-p", "chunked", "--target-qps", "8", "--slo", "ttft_p99=2s",
        "--slo", "tpot_p99=100ms", "--max-verify-runs", "3"]


@pytest.fixture(scope="module")
def priced():
    result = runner.invoke(app, PLAN + ["--price", "h100-sxm=2.10", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_price_override_cost_columns_and_nodes(priced):
    assert priced["prices_usd_per_gpu_hour"]["h100-sxm"] == {"usd": 2.10, "from": "--price"}
    assert priced["prices_usd_per_gpu_hour"]["a100-80g-sxm"]["from"] == "profile cost_per_hour_usd"
    for row in priced["candidates"]:
        price = priced["prices_usd_per_gpu_hour"][row["hardware"]]["usd"]
        assert row["cost_per_hour_usd"] == pytest.approx(row["gpus"] * price)
        assert row["usd_per_m_total_tokens"] < row["usd_per_m_output_tokens"]  # prompts are tokens too
        per_node = row["gpus_per_node"] // row["tp"]
        assert (row["nodes"] - 1) * per_node < row["replicas"] <= row["nodes"] * per_node
        assert row["whole_node_cost_per_hour_usd"] == pytest.approx(row["nodes"] * row["gpus_per_node"] * price)


def test_trust_section_and_its_lines(priced):
    trust = priced["trust"]
    assert trust["extrapolating"] and all(isinstance(r, str) for r in trust["extrapolating"])
    assert "unvalidated" in trust["validation"]["line"] or trust["validation"]["n_cases"] > 0
    text = runner.invoke(app, PLAN)
    assert text.exit_code == 0, text.output
    assert "extrapolating: profile" in text.output and "validation: " in text.output
    assert "$/M out" in text.output and "$/M tok" in text.output and "whole nodes:" in text.output


def test_validation_coverage_counts_the_bundled_cases():
    """vLLM's perf CI has Llama-3.1-8B on H200 at TP1 (sim/validate/cases/vllm_perf_ci.csv)."""
    covered = validation_coverage(EngineConfig(model="llama-3.1-8b", hardware="h200", tp=1))
    assert covered["n_cases_same_tp"] >= 1 and any(e.startswith("vllm@") for e in covered["engines"])  # versioned
    assert validation_coverage(EngineConfig(model="mistral-7b", hardware="a100-80g-sxm"))["n_cases"] == 0


@pytest.mark.parametrize("texts, needle", [(["h100=2"], "one of --hardware"), (["h100-sxm=-1"], "> 0"),
                                           (["h100-sxm=abc"], "> 0"), (["h100-sxm=1", "h100-sxm=2"], "twice")])
def test_bad_prices_are_one_line(texts, needle):
    with pytest.raises(InputError, match=needle):
        parse_prices(texts, ["h100-sxm"])


def test_simultaneous_arrivals_are_named_as_the_cause():
    """Mooncake's conversation trace: 12,031 requests on 1,180 timestamps; a tight TPOT cannot hold
    at any rate because each group of up to ~20 arrives at once."""
    result = runner.invoke(app, ["plan", "-w", "mooncake_conversation", "-m", "llama-3.1-8b", "--target-qps", "1",
                                 "--slo", "ttft_p99=30s", "--slo", "tpot_p99=200ms", "-H", "h100-sxm", "--tp", "1",
                                 "-p", "radix", "--max-requests", "200", "--workers", "1"])
    assert result.exit_code == 2
    assert "no candidate meets the SLOs even at 0.00781 qps" in result.stderr
    assert "distinct timestamps" in result.stderr and "at the same instant" in result.stderr


def test_rejections_name_their_reason():
    result = runner.invoke(app, ["plan", "-w", "mooncake_conversation", "-m", "llama-3-8b", "--target-qps", "1",
                                 "--slo", "ttft_p99=30s", "-H", "h100-sxm", "--tp", "1", "-p", "radix",
                                 "--max-requests", "100", "--workers", "1"])
    assert result.exit_code == 2 and "first rejected: prompt of" in result.stderr
    assert "max_model_len=8192" in result.stderr


def test_pareto_per_gpu_and_per_dollar_without_probes(priced):
    from sim.planner.knobs import PROBE_BELOW_SHARE
    from sim.planner.pareto_plot import pareto_figure

    best_rate = {(r["hardware"], r["tp"]): r["max_qps_per_replica"] for r in priced["candidates"]}
    for key in ("pareto", "pareto_per_dollar"):
        assert priced[key]
        for p in priced[key]:
            assert p["rate_qps_per_replica"] >= best_rate[(p["hardware"], p["tp"])] * PROBE_BELOW_SHARE
    price = {k: v["usd"] for k, v in priced["prices_usd_per_gpu_hour"].items()}
    for p in priced["pareto_per_dollar"]:
        assert p["tok_per_usd"] == pytest.approx(p["tok_s_per_gpu"] * 3600 / price[p["hardware"]])
    fig = pareto_figure(priced)
    assert len(fig.legends) == 1 and not any(ax.get_legend() for ax in fig.axes)  # one legend, in the figure
    stars = [line for ax in fig.axes for line in ax.get_lines() if line.get_marker() == "*"]
    metered = any("tok_per_joule" in p for p in priced["pareto"])  # a third panel: tokens per joule
    assert len(fig.axes) == len(stars) == (3 if metered else 2) and "recommended" in stars[0].get_label()
    assert any(text.get_text() for ax in fig.axes for text in ax.texts)  # frontier points are labelled
