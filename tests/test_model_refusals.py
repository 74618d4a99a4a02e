"""config.json fields that change the math and are not modelled: one line naming the file and the
field, exit 2, never a silent dense fallback. Each case edits a published config (tests/fixtures/hf)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sim.cli import app

HF_DIR = Path(__file__).parent / "fixtures" / "hf"
runner = CliRunner()


def _drop(key):
    def edit(config):
        config.pop(key)
    return edit


def _set(key, value, inside=None):
    def edit(config):
        (config[inside] if inside else config)[key] = value
    return edit


# (case id, base fixture, edit, the field the one line must name)
CASES = [
    ("unknown model_type", "llama-3-8b", _set("model_type", "mamba"), "model_type"),
    ("qwen2-moe experts on a llama", "llama-3-8b", _set("num_experts", 64), "num_experts"),
    ("MLA ranks on a llama", "llama-3-8b", _set("kv_lora_rank", 512), "kv_lora_rank"),
    ("MTP layers on a qwen3", "qwen3-8b", _set("num_nextn_predict_layers", 1), "num_nextn_predict_layers"),
    ("hybrid layer_types on a qwen3", "qwen3-8b", _set("layer_types", ["linear_attention"] * 36), "layer_types"),
    ("deepseek moe_layer_freq", "deepseek-v3", _set("moe_layer_freq", 2), "moe_layer_freq"),
    ("deepseek ep_size", "deepseek-v3", _set("ep_size", 8), "ep_size"),
    ("deepseek-v3.2 sparse attention", "deepseek-v3", _set("index_topk", 2048), "index_topk"),
    ("deepseek without kv_lora_rank", "deepseek-v3", _drop("kv_lora_rank"), "kv_lora_rank"),
    ("qwen3-moe without moe width", "qwen3-30b-a3b", _drop("moe_intermediate_size"), "moe_intermediate_size"),
    ("qwen3-moe shared experts", "qwen3-30b-a3b", _set("shared_expert_intermediate_size", 4096),
     "shared_expert_intermediate_size"),
    ("gpt-oss unknown layer type", "gpt-oss-20b", _set("layer_types", ["chunked_attention"] * 24), "layer_types"),
    ("gpt-oss top-k disagree", "gpt-oss-20b", _set("experts_per_token", 8), "experts_per_token"),
    ("unknown quant_method", "qwen3-8b", _set("quantization_config", {"quant_method": "bitsandbytes"}),
     "quantization_config.quant_method"),
    ("fp8 e5m2", "deepseek-v3", _set("fmt", "e5m2", inside="quantization_config"), "quantization_config.fmt"),
    ("modelopt W4A8", "qwen3-8b", _set("quantization_config", {"quant_method": "modelopt", "quant_algo": "W4A8_AWQ"}),
     "quantization_config.quant_algo"),
    ("8-bit gptq", "qwen3-8b", _set("quantization_config", {"quant_method": "gptq", "bits": 8}),
     "quantization_config.bits"),
    ("unmappable exclusion", "qwen3-8b",
     _set("quantization_config", {"quant_method": "fp8", "modules_to_not_convert": ["model.layers.0.foo"]}),
     "quantization_config.modules_to_not_convert"),
    ("llama4 without text_config", "llama-4-scout", _drop("text_config"), "text_config"),
    ("llama4 text field not modelled", "llama-4-scout", _set("moe_num_experts", 8, inside="text_config"),
     "text_config.moe_num_experts"),
    ("llama4 no_rope_layers length", "llama-4-scout", _set("no_rope_layers", [1, 0], inside="text_config"),
     "text_config.no_rope_layers"),
    ("glm4-moe without experts", "glm-4.5-air", _drop("n_routed_experts"), "n_routed_experts"),
    ("zero experts per token", "qwen3-30b-a3b", _set("num_experts_per_tok", 0), "num_experts_per_tok"),
]


@pytest.mark.parametrize(("base", "edit", "field"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_unmodelled_config_field_is_one_line_exit_2(tmp_path, base, edit, field):
    config = json.loads((HF_DIR / base / "config.json").read_text())
    edit(config)
    path = tmp_path / base / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(config))
    result = runner.invoke(app, ["memory", "--model", str(path), "--hardware", "h200", "--json"])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.stderr
    assert lines[0].startswith(f"error: {path}: {field}:"), lines[0]
    assert not result.stdout.strip()


def test_every_published_fixture_is_read_without_refusal():
    for config in sorted(HF_DIR.glob("*/config.json")):
        if config.parent.name in ("bad-json", "no-layers"):
            continue
        tp = "4" if config.parent.name == "qwen2.5-7b" else "8"  # 28 heads
        result = runner.invoke(app, ["memory", "--model", str(config), "--hardware", "b200", "--tp", tp,
                                     "--weight-dtype", "auto", "--json"])
        assert result.exit_code == 0, (config, result.output)


def test_calibrate_run_refuses_fp4_in_one_line_and_writes_nothing(tmp_path):
    """MLA models are calibrated now (tests/test_calibrate_arch_shapes.py); FP4 GEMMs are not."""
    out = tmp_path / "cal.yaml"
    result = runner.invoke(app, ["calibrate", "run", "--device", "cpu", "--quick", "--model", "deepseek-v3",
                                 "--dtype", "fp4", "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "--dtype" in result.stderr and "FP4" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output and not list(tmp_path.iterdir())
