"""Speculative decoding: acceptance draws against the closed form, exact step counts at the
extremes (a = 0, a = 1), a long request's steps against the expectation, determinism, the cost of
a verify step, and bad knobs -> one line, exit 2."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import STEP_S, ConstantCost, make_trace
from typer.testing import CliRunner

from sim.cli import app
from sim.engine.spec_decode import draw_accepted, expected_tokens_per_step
from sim.inputs.config import EngineConfig
from sim.run.invoke import load_run_workload
from sim.run.simulate import simulate
from sim.run.summary import requests_frame, summarize

N_DRAWS = 400_000


@pytest.mark.parametrize("k", [1, 2, 4, 7])
@pytest.mark.parametrize("a", [0.3, 0.6, 0.8, 0.95])
def test_tokens_per_step_match_the_closed_form(k, a):
    closed_form = (1 - a ** (k + 1)) / (1 - a)
    assert expected_tokens_per_step([a] * k) == pytest.approx(closed_form, rel=1e-12)
    tokens = 1 + draw_accepted(np.random.default_rng(k), np.full(k, a), N_DRAWS)
    sigma = tokens.std() / np.sqrt(N_DRAWS)
    assert abs(tokens.mean() - closed_form) < 5 * sigma


def test_per_position_rates():
    rates = [0.9, 0.7, 0.4]
    expected = 1 + 0.9 + 0.9 * 0.7 + 0.9 * 0.7 * 0.4
    assert expected_tokens_per_step(rates) == pytest.approx(expected)
    tokens = 1 + draw_accepted(np.random.default_rng(1), np.array(rates), N_DRAWS)
    assert tokens.mean() == pytest.approx(expected, abs=0.01)
    # P(exactly j accepted) = prod(a_1..a_j) * (1 - a_{j+1})
    counts = np.bincount(tokens - 1, minlength=4) / N_DRAWS
    np.testing.assert_allclose(counts, [0.1, 0.9 * 0.3, 0.9 * 0.7 * 0.6, 0.9 * 0.7 * 0.4], atol=0.005)


def _one_request(k: int, a: float, output: int, policy: str = "continuous", seed: int = 0):
    cfg = EngineConfig(policy=policy, spec_tokens=k, spec_acceptance=[a], max_model_len=8192, seed=seed)
    result = simulate(cfg, make_trace([(0.0, 64, output)]), cost=ConstantCost())
    return result, requests_frame(result)


@pytest.mark.parametrize("policy", ["continuous", "chunked", "radix"])
@pytest.mark.parametrize(("a", "tokens_per_step"), [(0.0, 1), (1.0, 5)])
def test_extreme_acceptance_gives_exact_steps(policy, a, tokens_per_step):
    output = 101
    result, frame = _one_request(4, a, output, policy)
    row = frame.iloc[0]
    assert row["status"] == "FINISHED" and row["output_tokens"] == output
    n_decode_steps = -(-(output - 1) // tokens_per_step)
    assert result.recorder.n_steps == 1 + n_decode_steps
    # the prefill step drafts nothing; each decode step adds k x 0.05 (the default head cost) x a step
    assert row["e2e_s"] == pytest.approx(STEP_S + n_decode_steps * STEP_S * (1 + 4 * 0.05))


def test_long_request_steps_follow_the_expectation():
    k, a, output = 3, 0.7, 8_001
    result, frame = _one_request(k, a, output)
    assert frame["output_tokens"].iloc[0] == output
    per_step = (output - 1) / (result.recorder.n_steps - 1)
    # ~3200 steps, tokens per step have sd ~1.1: the mean is within 0.03 of its expectation (4 sd)
    assert per_step == pytest.approx((1 - a ** (k + 1)) / (1 - a), rel=0.03)
    spec = summarize(result, frame)["spec_decoding"]
    assert spec["tokens_per_step_expected"] == pytest.approx((1 - a ** (k + 1)) / (1 - a))


def test_same_seed_same_run_other_seed_other_draws():
    runs = [_one_request(2, 0.6, 500, seed=s)[1] for s in (0, 0, 1)]
    assert runs[0].equals(runs[1])
    assert runs[0]["e2e_s"].iloc[0] != runs[2]["e2e_s"].iloc[0]


def test_spec_off_by_default_changes_nothing():
    workload = load_run_workload("splitwise_conv", rate_scale=2, max_requests=150)
    plain = requests_frame(simulate(EngineConfig(policy="chunked"), workload))
    zero = requests_frame(simulate(EngineConfig(policy="chunked", spec_tokens=0, spec_acceptance=[0.3]), workload))
    assert plain.equals(zero)


def test_verify_step_costs_more_than_a_decode_and_pays_at_small_batch():
    workload = load_run_workload("splitwise_conv", rate_scale=0.5, max_requests=120)
    base = EngineConfig(model="llama-3-70b", tp=4, policy="chunked")
    plain = summarize(simulate(base, workload))
    spec = summarize(simulate(base.model_copy(update={"spec_tokens": 4, "spec_acceptance": [0.8]}), workload))
    assert spec["tpot_s"]["p50"] < plain["tpot_s"]["p50"]
    assert spec["n_finished"] == plain["n_finished"]


def test_draft_model_costs_its_own_steps():
    workload = load_run_workload("splitwise_conv", rate_scale=0.5, max_requests=60)
    base = EngineConfig(model="llama-3-70b", tp=4, policy="continuous", spec_tokens=3, spec_acceptance=[0.7])
    heads = summarize(simulate(base.model_copy(update={"spec_draft_cost": 0.0}), workload))
    draft = summarize(simulate(base.model_copy(update={"spec_method": "draft", "spec_draft_model": "llama-3-8b"}),
                               workload))
    assert draft["tpot_s"]["p50"] > heads["tpot_s"]["p50"]


@pytest.mark.parametrize("args", [
    ["--spec-tokens", "2", "--spec-acceptance", "1.5"],
    ["--spec-tokens", "2", "--spec-acceptance", "-0.1"],
    ["--spec-tokens", "2", "--spec-acceptance", "0.5,0.5,0.5"],
    ["--spec-tokens", "-1"],
    ["--spec-tokens", "2", "--spec-method", "draft"],
    ["--spec-tokens", "2", "--policy", "static"],
])
def test_bad_spec_knobs_one_line_exit_2(args):
    result = CliRunner().invoke(app, ["simulate", "--max-requests", "5", *args])
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1
    assert "Traceback" not in result.output


def test_unknown_draft_model_names_its_own_flag():
    """QA: an unknown --spec-draft-model was reported as a bad --model."""
    result = CliRunner().invoke(app, ["simulate", "--max-requests", "5", "--spec-tokens", "2", "--spec-method",
                                      "draft", "--spec-draft-model", "no-such-model"])
    assert result.exit_code == 2, result.output
    assert result.output.strip().startswith("error: --spec-draft-model: unknown model 'no-such-model'")


def test_a_draft_model_takes_gpu_memory():
    """QA: --spec-method draft left the KV blocks as without a draft, and a 70B draft next to an 8B
    target "fit" one H100. The draft's weights and per-token KV now come out of the KV budget."""
    from sim.inputs.hardware import load_hardware
    from sim.inputs.layout.memory import plan_memory
    from sim.inputs.model import load_model

    target, draft, hw = load_model("llama-3-70b"), load_model("llama-3-8b"), load_hardware("h100-sxm")
    alone, with_draft = plan_memory(target, hw, 4), plan_memory(target, hw, 4, draft=draft)
    assert with_draft.weight_bytes_per_gpu > alone.weight_bytes_per_gpu
    assert with_draft.kv_bytes_per_token_per_gpu > alone.kv_bytes_per_token_per_gpu
    assert with_draft.num_gpu_blocks < alone.num_gpu_blocks
    result = CliRunner().invoke(app, ["simulate", "--max-requests", "5", "--spec-tokens", "2", "--spec-method",
                                      "draft", "--spec-draft-model", "llama-3-70b"])
    assert result.exit_code == 2 and "(+ draft llama-3-70b)" in result.output and "does not fit" in result.output
