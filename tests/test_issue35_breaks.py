"""Issue 35 item 7's five breaks, one test each: plan --emit k8s with SGLang (refused then; written since
issue 45, LMDeploy still refused before planning), Qwen's
use_sliding_window, bench_serve.json through pd.read_json (with vLLM's itls), the advice past a
node's GPUs, and `infersim models PATH`."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.errors import InputError
from sim.inputs.model import load_model

runner = CliRunner()
TRACE_30 = "arrival_s,prompt_tokens,output_tokens\n" + "".join(f"{i * 0.5},100,10\n" for i in range(30))
QWEN2 = {"model_type": "qwen2", "num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1000}


def _trace(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(TRACE_30)
    return str(path)


def test_plan_emit_k8s_with_sglang_writes_sglang_manifests(tmp_path):
    """Issue 35 refused SGLang before planning; since issue 45 SGLang gets its own container."""
    import yaml

    out = tmp_path / "plan"
    result = runner.invoke(app, ["plan", "-w", _trace(tmp_path), "--slo", "ttft_p99=1s", "-H", "h100-sxm", "--tp", "1",
                                 "-p", "chunked", "--target-qps", "1", "--engine", "sglang", "-o", str(out),
                                 "--emit", "k8s"])
    assert result.exit_code == 0, result.output
    deployment = next(yaml.safe_load_all((out / "k8s.yaml").read_text()))
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["python3", "-m", "sglang.launch_server"]


def test_plan_emit_k8s_with_lmdeploy_is_refused_before_planning(tmp_path):
    out = tmp_path / "plan"
    result = runner.invoke(app, ["plan", "-w", _trace(tmp_path), "--slo", "ttft_p99=1s", "-H", "h100-sxm", "--tp", "1",
                                 "-p", "chunked", "--target-qps", "1", "--engine", "lmdeploy", "-o", str(out),
                                 "--emit", "k8s"])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().startswith("error: --emit: k8s: writes manifests for vLLM, SGLang and TensorRT-LLM")
    assert "planned in" not in result.stdout and not out.exists()  # refused before any work, nothing written


def test_qwen2_sliding_window_read_as_transformers_or_refused(tmp_path):
    def spec(**fields):  # a file per config: load_model caches by path
        path = tmp_path / f"{len(list(tmp_path.iterdir()))}" / "config.json"
        path.parent.mkdir()
        path.write_text(json.dumps({**QWEN2, **fields}))
        return load_model(str(path))

    windowed = spec(use_sliding_window=True, sliding_window=128, max_window_layers=2)
    assert list(windowed.layer_attention) == ["full", "full", "sliding", "sliding"] and windowed.window_tokens == 128
    typed = spec(use_sliding_window=True, sliding_window=128,
                 layer_types=["sliding_attention", "full_attention", "full_attention", "sliding_attention"])
    assert list(typed.layer_attention) == ["sliding", "full", "full", "sliding"]
    assert spec(use_sliding_window=False, sliding_window=128, max_window_layers=2).window_tokens is None
    for fields, named in (({"use_sliding_window": True, "max_window_layers": 2}, "sliding_window"),
                          ({"use_sliding_window": True, "sliding_window": 128, "max_window_layers": 4},
                           "use_sliding_window"),
                          ({"use_sliding_window": True, "sliding_window": 128}, "max_window_layers"),
                          ({"layer_types": ["sliding_attention"] * 4, "sliding_window": 128}, "layer_types")):
        with pytest.raises(InputError) as caught:
            spec(**fields)
        assert caught.value.field == named


def test_bench_serve_json_reads_with_pandas_and_holds_vllm_itls(tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(app, ["simulate", "-t", _trace(tmp_path), "-o", str(out), "--save-detailed"])
    assert result.exit_code == 0, result.output
    frame = pd.read_json(out / "bench_serve.json")  # one row per request, the scalars broadcast
    assert len(frame) == 30 and (frame["completed"] == 30).all() and (frame["failed"] == 0).all()
    assert {"itls", "latencies", "start_times", "ttfts", "input_lens", "output_lens", "errors"} <= set(frame.columns)
    assert not any(isinstance(v, dict) for v in json.loads((out / "bench_serve.json").read_text()).values())
    for gaps, ttft, latency, n_out in zip(frame["itls"], frame["ttfts"], frame["latencies"], frame["output_lens"],
                                          strict=True):
        assert len(gaps) == n_out - 1 and sum(gaps) == pytest.approx(latency - ttft)
    plain = tmp_path / "plain"
    assert runner.invoke(app, ["simulate", "-t", _trace(tmp_path), "-o", str(plain)]).exit_code == 0
    assert "itls" not in json.loads((plain / "bench_serve.json").read_text())  # as vLLM without --save-detailed
    assert len(pd.read_json(plain / "bench_serve.json")) == 30


def test_advice_past_a_node_is_pipeline_stages_not_a_larger_tp(tmp_path):
    base = ["plan", "-w", _trace(tmp_path), "--slo", "ttft_p99=1s", "-H", "h100-sxm", "--target-qps", "1",
            "-m", "llama-3.1-405b"]
    at_node = runner.invoke(app, [*base, "--tp", "8"])
    assert at_node.exit_code == 2 and "tp 8 fills a node: span nodes with pipeline stages (plan --pp 1,2" in \
        at_node.stderr
    assert "raise --tp" not in at_node.stderr
    past_node = runner.invoke(app, [*base, "--tp", "16"])
    assert past_node.exit_code == 2 and "tp 16 exceeds the 8 GPUs of one node" in past_node.stderr
    assert "pipeline stages" in past_node.stderr


def test_models_takes_paths_and_names(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**QWEN2, "model_type": "llama"}))
    result = runner.invoke(app, ["models", str(path), "llama-3-8b", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["layers"] for r in rows] == [4, 32] and rows[1]["name"] == "llama-3-8b"
    unknown = runner.invoke(app, ["models", "llama-9"])
    assert unknown.exit_code == 2 and "models: llama-9: unknown model" in unknown.stderr
