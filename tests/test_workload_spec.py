"""Workload spec YAMLs: the bundled examples load, transforms apply, bad specs name the
file and the key, `sample` writes what the spec describes."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from sim.cli.workload import workload_app
from sim.errors import InputError
from sim.inputs.workload import load_workload
from sim.inputs.workload.stats import describe
from sim.inputs.workload.trace import ClosedLoop, Trace
from sim.paths import bundled_dir

EXAMPLES = sorted(p.stem for p in bundled_dir("workloads").glob("*.yaml"))


def test_there_are_example_specs():
    assert {"poisson_sharegpt", "multiturn_chat", "system_prompts", "closed_loop"} <= set(EXAMPLES)


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_example_spec_loads_deterministically(name):
    first, again = load_workload(name), load_workload(name)
    trace_a = first.pool if isinstance(first, ClosedLoop) else first
    trace_b = again.pool if isinstance(again, ClosedLoop) else again
    assert len(trace_a) > 0
    np.testing.assert_array_equal(trace_a.prompt_tokens, trace_b.prompt_tokens)
    np.testing.assert_array_equal(trace_a.arrival_s, trace_b.arrival_s)


def test_multiturn_example_clips_and_shares_prefixes():
    trace = load_workload("multiturn_chat")
    assert (trace.prompt_tokens + trace.output_tokens <= 8192).all()
    assert describe(trace)["prefix_hit_rate_infinite"] > 0.5


def test_closed_loop_example():
    workload = load_workload("closed_loop")
    assert isinstance(workload, ClosedLoop)
    assert workload.concurrency == 32 and len(workload.pool) == 2000


def _spec_file(tmp_path, text, name="w.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_trace_spec_with_transforms(tmp_path):
    path = _spec_file(
        tmp_path,
        (
            "trace: splitwise_conv\n"
            "transforms: {time_window_s: [0, 600], rate_scale: 2.0, clip_max_model_len: 2048,"
            " sample_n: 1000, shuffle_seed: 1}\n"
        ),
    )
    trace = load_workload(path)
    raw = load_workload("splitwise_conv")
    in_window = raw.arrival_s < 600
    assert len(trace) == 1000 and in_window.sum() > 1000
    assert trace.arrival_s.max() < 300  # the 600 s window, twice as fast
    assert (trace.prompt_tokens + trace.output_tokens <= 2048).all()


def test_length_only_trace_retimed_by_spec_arrival(tmp_path):
    path = _spec_file(tmp_path, "trace: sharegpt\narrival: {kind: constant, rate_qps: 20}\n")
    trace = load_workload(path)
    np.testing.assert_allclose(np.diff(trace.arrival_s), 0.05)


def test_seed_argument_overrides_the_spec_seed(tmp_path):
    path = _spec_file(
        tmp_path,
        (
            "synthetic:\n  arrival: {kind: poisson, rate_qps: 2}\n"
            "  lengths: {prompt: {kind: uniform, low: 1, high: 99}, output: {kind: fixed, value: 5}}\n"
            "  n_requests: 50\nseed: 3\n"
        ),
    )
    own, same, other = load_workload(path), load_workload(path, seed=3), load_workload(path, seed=4)
    np.testing.assert_array_equal(own.prompt_tokens, same.prompt_tokens)
    assert not np.array_equal(own.prompt_tokens, other.prompt_tokens)


_POISSON = "synthetic:\n  arrival: {kind: poisson, rate_qps: 1}\n"
_SHAREGPT = "  lengths: {trace: sharegpt}\n  n_requests: 5\n"
BAD_SPECS = [
    ("trace: splitwise_conv\ntransfroms: {}\n", "transfroms", "unknown key"),
    (
        "trace: splitwise_conv\ntransforms: {rate_scale: -1}\n",
        "transforms.rate_scale",
        "greater than 0",
    ),
    (_POISSON.replace("poisson", "poison") + _SHAREGPT, "synthetic.arrival", "poison"),
    (
        _POISSON.replace("1}", "1, burst: 2}") + _SHAREGPT,
        "synthetic.arrival.poisson.burst",
        "unknown key",
    ),
    (
        _POISSON + "  lengths: {trace: sharegpt}\n",
        "synthetic",
        "exactly one of n_requests and duration_s",
    ),
    (
        _POISSON.replace("poisson, rate_qps: 1", "closed_loop, concurrency: 4")
        + _SHAREGPT
        + "  prefix: {multi_turn: {turns: {kind: fixed, value: 2}, think_time_s: 1}}\n",
        "synthetic",
        "open-loop",
    ),
    (
        _POISSON + "  lengths: {prompt: {kind: fixed, value: 3}}\n  n_requests: 5\n",
        "synthetic.lengths",
        "both `prompt` and `output`",
    ),
    (
        "trace: splitwise_conv\n" + _POISSON + _SHAREGPT,
        None,
        "exactly one of `trace` and `synthetic`",
    ),
    ("trace: [unclosed\n", None, "not valid YAML"),
    ("- just\n- a list\n", None, "YAML mapping"),
    (
        "trace: splitwise_conv\ntransforms: {time_window_s: [99999, 100000]}\n",
        "transforms.time_window_s",
        "holds no request",
    ),
]


@pytest.mark.parametrize(("text", "field", "message"), BAD_SPECS)
def test_bad_specs_name_file_and_key(tmp_path, text, field, message):
    path = _spec_file(tmp_path, text)
    with pytest.raises(InputError, match=message) as caught:
        load_workload(path)
    assert caught.value.where == str(path)
    assert caught.value.field == field


def test_cli_sample_writes_the_spec_as_canonical_jsonl(tmp_path):
    out = tmp_path / "chat.jsonl"
    result = CliRunner().invoke(
        workload_app, ["sample", "multiturn_chat", "--out", str(out), "--seed", "5"]
    )
    assert result.exit_code == 0, result.output
    written, generated = load_workload(out), load_workload("multiturn_chat", seed=5)
    assert isinstance(written, Trace)
    for name in ("arrival_s", "prompt_tokens", "output_tokens", "hash_ids_flat", "hash_offsets"):
        np.testing.assert_array_equal(getattr(written, name), getattr(generated, name))
    np.testing.assert_array_equal(written.extra["session_id"], generated.extra["session_id"])
    assert written.hash_block_tokens == 16
