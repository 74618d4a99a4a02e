"""Transformations, describe and the `workload` CLI commands."""

from __future__ import annotations

import json

import numpy as np
import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sim.cli.workload import workload_app
from sim.errors import InputError
from sim.inputs.workload import load_workload
from sim.inputs.workload.columns import ragged_offsets
from sim.inputs.workload.stats import describe
from sim.inputs.workload.trace import Trace
from sim.inputs.workload.transforms import (
    apply_transforms,
    clip_max_model_len,
    mean_qps,
    sample_requests,
    scale_rate,
    shuffle_lengths,
    time_window,
)


@pytest.fixture(scope="module")
def mooncake():
    return load_workload("mooncake_conversation")


def test_time_window_keeps_the_window_and_rebases(mooncake):
    window = time_window(mooncake, 600.0, 1200.0)
    inside = (mooncake.arrival_s >= 600) & (mooncake.arrival_s < 1200)
    assert len(window) == inside.sum()
    np.testing.assert_allclose(window.arrival_s, mooncake.arrival_s[inside] - 600.0)
    assert window.arrival_s.min() >= 0 and window.arrival_s.max() < 600
    with pytest.raises(InputError, match="time_window_s"):
        time_window(mooncake, 5000.0, 6000.0)


def test_rate_scaling_by_factor_and_to_target_qps(mooncake):
    doubled = scale_rate(mooncake, factor=2.0)
    assert mean_qps(doubled) == pytest.approx(2 * mean_qps(mooncake))
    targeted = scale_rate(mooncake, target_qps=7.5)
    assert describe(targeted)["mean_qps"] == pytest.approx(7.5)
    np.testing.assert_array_equal(targeted.prompt_tokens, mooncake.prompt_tokens)


def test_clip_to_max_model_len_keeps_honest_hash_ids(mooncake):
    clipped = clip_max_model_len(mooncake, 8192)
    assert (clipped.prompt_tokens + clipped.output_tokens <= 8192).all()
    assert (clipped.output_tokens >= 1).all()
    short = mooncake.prompt_tokens + mooncake.output_tokens <= 8192
    np.testing.assert_array_equal(clipped.output_tokens[short], mooncake.output_tokens[short])
    n_ids = np.diff(clipped.hash_offsets)
    assert (n_ids <= -(-clipped.prompt_tokens // 512)).all()
    # 8191 = 15 whole blocks + 511 tokens: the partial 16th block gets an id no one else has
    truncated = np.flatnonzero(mooncake.prompt_tokens > 8191)
    last_ids = clipped.hash_ids_flat[clipped.hash_offsets[truncated + 1] - 1]
    assert len(set(last_ids.tolist())) == len(truncated)
    assert not set(last_ids.tolist()) & set(mooncake.hash_ids_flat.tolist())


def test_sample_and_shuffle(mooncake):
    rng = np.random.default_rng(0)
    sample = sample_requests(mooncake, 1000, rng)
    assert len(sample) == 1000 and (np.diff(sample.arrival_s) >= 0).all()
    assert set(sample.arrival_s.tolist()) <= set(mooncake.arrival_s.tolist())
    shuffled = shuffle_lengths(sample, np.random.default_rng(1))
    np.testing.assert_array_equal(shuffled.arrival_s, sample.arrival_s)
    pairs = sorted(zip(sample.prompt_tokens.tolist(), sample.output_tokens.tolist()))
    assert sorted(zip(shuffled.prompt_tokens.tolist(), shuffled.output_tokens.tolist())) == pairs
    assert not np.array_equal(shuffled.prompt_tokens, sample.prompt_tokens)
    with pytest.raises(InputError, match="sample_n"):
        sample_requests(mooncake, 10**6, rng)


def test_apply_transforms_is_deterministic(mooncake):
    options = {
        "time_window_s": (0, 1800),
        "sample_n": 500,
        "shuffle_seed": 1,
        "target_qps": 2.0,
        "clip_max_model_len_tokens": 4096,
        "seed": 7,
    }
    first, second = apply_transforms(mooncake, **options), apply_transforms(mooncake, **options)
    np.testing.assert_array_equal(first.prompt_tokens, second.prompt_tokens)
    np.testing.assert_array_equal(first.hash_ids_flat, second.hash_ids_flat)
    assert len(first) == 500 and describe(first)["mean_qps"] == pytest.approx(2.0)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 100), st.integers(1, 50), st.integers(0, 8)),
        min_size=1,
        max_size=20,
    ),
    st.integers(2, 120),
)
def test_clip_invariants(rows, max_model_len):
    prompts, outputs, n_ids = (np.array(column) for column in zip(*rows))
    trace = Trace(
        arrival_s=np.arange(len(rows), dtype=float),
        prompt_tokens=prompts,
        output_tokens=outputs,
        hash_ids_flat=np.arange(n_ids.sum()),
        hash_offsets=ragged_offsets(n_ids),
        hash_block_tokens=16,
    )
    clipped = clip_max_model_len(trace, max_model_len)
    total = clipped.prompt_tokens + clipped.output_tokens
    assert (total <= max_model_len).all() and (clipped.output_tokens >= 1).all()
    fits = prompts + outputs <= max_model_len
    np.testing.assert_array_equal(clipped.prompt_tokens[fits], prompts[fits])
    np.testing.assert_array_equal(clipped.output_tokens[fits], outputs[fits])
    assert len(np.unique(clipped.hash_ids_flat)) == len(clipped.hash_ids_flat)


def test_describe_keys(mooncake):
    summary = describe(mooncake)
    for key in (
        "n_requests",
        "duration_s",
        "mean_qps",
        "mean_input_tokens",
        "mean_output_tokens",
        "prefix_hit_rate_infinite",
        "input_tokens",
        "output_tokens",
    ):
        assert key in summary
    assert summary["input_tokens"]["p50"] == float(np.median(mooncake.prompt_tokens))
    assert describe(load_workload("azure_code_2023"))["prefix_hit_rate_infinite"] is None


def _app_like_main_cli() -> typer.Typer:
    """What sim/cli/errors.py does with InputError: one line on stderr, exit 2."""
    app = typer.Typer()

    @app.callback()
    def root() -> None:
        pass

    app.add_typer(workload_app, name="workload")
    return app


def _invoke(args):
    app = _app_like_main_cli()
    try:
        result = CliRunner().invoke(app, args, catch_exceptions=True)
    except InputError as error:  # pragma: no cover - CliRunner catches
        raise AssertionError(error) from error
    if isinstance(result.exception, InputError):
        return 2, f"error: {result.exception.line()}"
    return result.exit_code, result.output


def test_cli_describe_json_reproduces_azure_conv():
    code, output = _invoke(["workload", "describe", "azure_conv_2023", "--json"])
    assert code == 0
    summary = json.loads(output)
    assert summary["n_requests"] == 19_366
    assert (
        round(summary["mean_input_tokens"]) == 1155 and round(summary["mean_output_tokens"]) == 211
    )
    assert summary["prefix_hit_rate_infinite"] is None


def test_cli_describe_text_and_bad_input(tmp_path):
    code, output = _invoke(["workload", "describe", "mooncake_synthetic"])
    assert code == 0 and "65.1%" in output
    bad = tmp_path / "bad.csv"
    bad.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0,x,1\n")
    code, output = _invoke(["workload", "describe", str(bad)])
    assert code == 2 and output.count("\n") == 0
    assert "bad.csv: num_prefill_tokens: must be a number; row 1 has 'x'" in output
    code, output = _invoke(["workload", "describe", "azure_conv_2023", "--columns", "nonsense"])
    assert code == 2 and "--columns" in output


def test_cli_sample_writes_canonical_jsonl(tmp_path):
    out = tmp_path / "w.jsonl"
    code, output = _invoke(["workload", "sample", "mooncake_synthetic", "--out", str(out)])
    assert code == 0 and "3,993" in output
    back = load_workload(out)
    assert len(back) == 3993 and back.hash_block_tokens == 512
    code, output = _invoke(
        ["workload", "sample", "mooncake_synthetic", "--out", str(tmp_path / "no" / "x")]
    )
    assert code == 2 and "--out" in output
