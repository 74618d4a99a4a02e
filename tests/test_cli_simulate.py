"""`infersim simulate` through typer's CliRunner: the output contract, config YAML + flag overrides,
and bad input (exit 2, one line on stderr, nothing already written lost)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from sim.cli import app

STATS = {"mean", "p50", "p90", "p99", "max"}
CONTRACT_KEYS = {"n_requests", "n_finished", "n_rejected", "sim_duration_s", "wall_time_s", "request_throughput",
                 "output_throughput_tok_s", "input_throughput_tok_s", "ttft_s", "tpot_s", "itl_s", "e2e_s",
                 "queue_delay_s", "goodput", "num_gpu_blocks", "kv_utilization_mean", "kv_fragmentation",
                 "preemptions", "prefix_hit_rate"}
REQUEST_COLUMNS = {"arrival_s", "first_token_s", "finish_s", "queue_delay_s", "prompt_tokens", "output_tokens",
                   "cached_tokens", "preemptions", "replica", "status", "ttft_s", "e2e_s", "reject_reason"}
STEP_COLUMNS = {"start_s", "batch_size", "prefill_tokens", "decode_tokens", "step_time_s", "kv_blocks_used"}


def invoke(*args: str):
    return CliRunner().invoke(app, ["simulate", *args])


@pytest.fixture(scope="module")
def json_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    result = invoke("--max-requests", "200", "--out", str(out), "--record-steps", "--json")
    return result, out


def test_json_run_writes_the_contract(json_run):
    result, out = json_run
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    summary = json.loads((out / "summary.json").read_text())
    assert printed == summary
    assert summary.keys() >= CONTRACT_KEYS
    for key in ("ttft_s", "tpot_s", "itl_s", "e2e_s", "queue_delay_s"):
        assert summary[key].keys() == STATS
        assert summary[key]["p50"] <= summary[key]["p90"] <= summary[key]["p99"] <= summary[key]["max"]
    assert summary["n_requests"] == 200 and summary["n_finished"] + summary["n_rejected"] == 200
    assert summary["goodput"] is None  # no SLOs given
    assert summary["policy"] == "continuous" and summary["model"] == "llama-3-8b"


def test_json_run_writes_request_and_step_tables(json_run):
    _, out = json_run
    summary = json.loads((out / "summary.json").read_text())
    requests = pd.read_parquet(out / "requests.parquet")
    steps = pd.read_parquet(out / "steps.parquet")
    assert len(requests) == 200 and set(requests.columns) >= REQUEST_COLUMNS
    assert (requests["e2e_s"] >= requests["ttft_s"]).all()
    assert set(steps.columns) >= STEP_COLUMNS and len(steps) == summary["n_steps"]
    assert steps["decode_tokens"].sum() + len(requests) == requests["output_tokens"].sum()
    assert steps["step_time_s"].sum() <= summary["sim_duration_s"]
    assert not list(out.glob(".*"))  # no temp files left behind


def test_without_record_steps_there_is_no_steps_table(tmp_path):
    result = invoke("--max-requests", "20", "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert (tmp_path / "summary.json").exists() and not (tmp_path / "steps.parquet").exists()
    assert "ttft" in result.stdout  # the readable table


def write_config(tmp_path, **keys):
    path = tmp_path / "engine.yaml"
    path.write_text(yaml.safe_dump(keys))
    return path


def test_config_yaml_with_the_flag_keys_works_and_flags_override_it(tmp_path):
    config = write_config(tmp_path, policy="chunked", tp=1, replicas=2, router="least_outstanding",
                          weight_dtype="bf16", kv_dtype="bf16", max_num_seqs=64, max_num_batched_tokens=4096,
                          block_size=32, gpu_memory_utilization=0.8, max_model_len=4096, swap_space=2,
                          num_gpu_blocks_override=3000, chunk_size=256, preemption_mode="swap",
                          radix_ordering="fcfs", batching_window_s=0.0, seed=3, record_steps=False)
    from_yaml = invoke("--config", str(config), "--max-requests", "30", "--json")
    assert from_yaml.exit_code == 0, from_yaml.output
    summary = json.loads(from_yaml.stdout)
    assert (summary["policy"], summary["replicas"], summary["block_size"]) == ("chunked", 2, 32)
    assert (summary["num_gpu_blocks"], summary["max_model_len"]) == (3000, 4096)

    overridden = invoke("--config", str(config), "--max-requests", "30", "--json", "--policy", "radix",
                        "--num-gpu-blocks-override", "2500", "--block-size", "16")
    assert overridden.exit_code == 0, overridden.output
    summary = json.loads(overridden.stdout)
    assert (summary["policy"], summary["num_gpu_blocks"], summary["block_size"]) == ("radix", 2500, 16)
    assert summary["replicas"] == 2  # what no flag overrides still comes from the file


def assert_one_line_exit_2(result, *words: str):
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert "Traceback" not in result.output
    for word in words:
        assert word in lines[0]


@pytest.mark.parametrize(("args", "words"), [
    (["--policy", "fifo"], ["--policy"]),
    (["--block-size", "-16"], ["--block-size"]),
    (["--trace", "no/such/trace.csv"], ["no/such/trace.csv"]),
    (["--policy", "static", "--num-gpu-blocks-override", "10"], ["max_model_len"]),  # fails mid-run
])
def test_bad_input_exits_2_with_one_line_and_keeps_the_old_summary(tmp_path, args, words):
    (tmp_path / "summary.json").write_text('{"kept": true}\n')
    result = invoke("--max-requests", "10", "--out", str(tmp_path), *args)
    assert_one_line_exit_2(result, *words)
    assert json.loads((tmp_path / "summary.json").read_text()) == {"kept": True}
    assert not (tmp_path / "requests.parquet").exists()


def test_unknown_key_in_config_yaml_exits_2(tmp_path):
    config = write_config(tmp_path, policy="continuous", max_num_seq=8)  # typo of max_num_seqs
    result = invoke("--config", str(config), "--max-requests", "10")
    assert_one_line_exit_2(result, "max_num_seq", "unknown field", str(config))
