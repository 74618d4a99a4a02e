"""CLI: profiles, models, memory, roofline through typer's runner; bad input -> one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from sim.cli import app
from sim.inputs.hardware import bundled_profiles, load_hardware
from sim.inputs.model import bundled_models, load_model
from sim.inputs.model.params import total_params
from sim.paths import bundled_dir

HF_DIR = Path(__file__).parent / "fixtures" / "hf"
runner = CliRunner()


def invoke_json(*args: str):
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def assert_one_line_error(result, *needles: str) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert isinstance(result.exception, SystemExit), result.exception  # typer.Exit(2), nothing uncaught
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def test_profiles_and_models_list_everything_bundled():
    assert [row["name"] for row in invoke_json("profiles")] == bundled_profiles()
    models = {row["name"]: row for row in invoke_json("models")}
    assert list(models) == bundled_models()
    assert models["mixtral-8x7b"]["params_b"] == pytest.approx(46.7, abs=0.05)
    assert models["mixtral-8x7b"]["active_params_b"] == pytest.approx(12.9, abs=0.05)


def test_tables_print_without_json():
    for command in ("profiles", "models", "memory", "roofline"):
        result = runner.invoke(app, [command])
        assert result.exit_code == 0 and result.stdout.strip(), command


@pytest.mark.parametrize(("model", "tp", "kv_dtype", "kv_bytes"), [
    ("llama-3-70b", 4, "bf16", 327_680),
    ("llama-3-8b", 1, "bf16", 131_072),
    ("llama-3-70b", 4, "fp8", 163_840),
])
def test_memory_json(model, tp, kv_dtype, kv_bytes):
    data = invoke_json("memory", "--model", model, "--hardware", "h100-sxm", "--tp", str(tp),
                       "--kv-dtype", kv_dtype)
    assert {"weight_bytes_per_gpu", "kv_bytes_per_token", "num_gpu_blocks", "max_cached_tokens"} <= set(data)
    assert data["kv_bytes_per_token"] == kv_bytes
    assert data["max_cached_tokens"] == data["num_gpu_blocks"] * data["block_size"]
    assert data["num_gpu_blocks"] > 0


def test_memory_options_reach_the_planner():
    small = invoke_json("memory", "--gpu-memory-utilization", "0.5", "--block-size", "32")
    large = invoke_json("memory", "--gpu-memory-utilization", "0.95", "--block-size", "32")
    assert small["block_size"] == 32 and small["num_gpu_blocks"] < large["num_gpu_blocks"]


def test_memory_of_a_model_that_does_not_fit():
    result = runner.invoke(app, ["memory", "--model", "llama-3-70b", "--hardware", "l40s", "--json"])
    assert_one_line_error(result, "does not fit", "l40s")
    assert result.stdout == ""


def test_roofline_json_llama_3_8b_on_h100():
    data = invoke_json("roofline", "--model", "llama-3-8b", "--hardware", "h100-sxm",
                       "--prefill-tokens", "4096", "--batch", "1", "--context", "1024")
    weights_s = total_params(load_model("llama-3-8b")) * 2 / load_hardware("h100-sxm").hbm_bandwidth_bytes_s
    decode, prefill = data["decode"], data["prefill"]
    assert decode["bound"] == "memory" and weights_s <= decode["time_s"] <= 1.5 * weights_s
    assert prefill["bound"] == "compute" and prefill["time_s"] > 10 * decode["time_s"]
    for step in (decode, prefill):
        for op in step["ops"]:
            assert set(op) == {"name", "time_s", "flops", "bytes", "bound"}
            assert op["bound"] in ("compute", "memory", "network")
        # the ops are whole-model totals: they add up to the step with its overhead
        assert sum(op["time_s"] for op in step["ops"]) + step["overhead_s"] == pytest.approx(step["time_s"])
    names = [op["name"] for op in decode["ops"]]
    assert {"qkv_proj", "o_proj", "gate_up_proj", "down_proj", "decode_attention", "lm_head"} <= set(names)
    assert "prefill_attention" in [op["name"] for op in prefill["ops"]]


def test_roofline_with_tp_has_allreduce():
    data = invoke_json("roofline", "--model", "llama-3-70b", "--tp", "8", "--batch", "32")
    assert "allreduce" in [op["name"] for op in data["decode"]["ops"]]


# ---------------------------------------------------------------- bad input
def bad_profile(tmp_path: Path, mutate) -> str:
    data = yaml.safe_load((bundled_dir("hwprofiles") / "h100-sxm.yaml").read_text())
    mutate(data)
    path = tmp_path / "bad-gpu.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_profile_with_negative_bandwidth(tmp_path):
    path = bad_profile(tmp_path, lambda d: d["memory"].update(hbm_bandwidth_gb_s=-1))
    result = runner.invoke(app, ["memory", "--hardware", path])
    assert_one_line_error(result, path, "memory.hbm_bandwidth_gb_s", "-1 is not plausible (allowed 10-100000 GB/s)")


def test_profile_with_missing_field(tmp_path):
    path = bad_profile(tmp_path, lambda d: d["compute"].pop("dense_bf16_tflops"))
    result = runner.invoke(app, ["roofline", "--hardware", path])
    assert_one_line_error(result, path, "compute.dense_bf16_tflops", "missing")


@pytest.mark.parametrize(("args", "needles"), [
    (["memory", "--model", "gpt-17"], ["--model", "gpt-17", "llama-3-8b"]),
    (["roofline", "--hardware", "tpu-v9"], ["--hardware", "tpu-v9", "h100-sxm"]),
    (["memory", "--model", str(HF_DIR / "bad-json" / "config.json")], ["bad-json/config.json", "JSON"]),
    (["memory", "--model", str(HF_DIR / "no-layers" / "config.json")], ["no-layers/config.json",
                                                                         "num_hidden_layers"]),
    (["memory", "--model", "nowhere/config.json"], ["nowhere/config.json", "not found"]),
    (["memory", "--tp", "3"], ["--tp", "n_heads=32"]),
    (["memory", "--kv-dtype", "fp4"], ["--kv-dtype", "fp8"]),
    (["memory", "--gpu-memory-utilization", "1.2"], ["--gpu-memory-utilization"]),
    (["roofline", "--batch", "0"], ["--batch"]),
    (["roofline", "--hardware", "a100-80g-sxm", "--weight-dtype", "fp8"], ["dense_fp8_tflops"]),
])
def test_bad_input_is_one_line_and_exit_2(args, needles):
    assert_one_line_error(runner.invoke(app, args), *needles)


def test_user_model_config_json_works_like_the_bundled_spec():
    from_hf = invoke_json("memory", "--model", str(HF_DIR / "llama-3-8b" / "config.json"))
    bundled = invoke_json("memory", "--model", "llama-3-8b")
    assert from_hf == bundled
