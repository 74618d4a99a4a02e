"""Issue 35 item 1: a command that names no weight dtype serves the checkpoint as stored (what vLLM
and SGLang do with a `quantization_config`); `--weight-dtype` overrides it; dense bf16 models keep
their old spelling (bf16) so their outputs do not move."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.inputs.config import EngineConfig
from sim.inputs.model import load_model
from sim.inputs.model.weights import describe_weight_dtype

HF_DIR = Path(__file__).parent / "fixtures" / "hf"


@pytest.mark.parametrize(("model", "expected"), [("llama-3-8b", "bf16"), ("qwen3-235b-a22b", "bf16"),
                                                 ("deepseek-r1", "auto"), ("gpt-oss-120b", "auto"),
                                                 ("qwen3-235b-a22b-fp8", "auto")])
def test_a_config_without_a_weight_dtype_takes_the_checkpoints(model, expected):
    assert EngineConfig.model_validate({"model": model}).weight_dtype == expected
    assert EngineConfig.model_validate({"model": model, "weight_dtype": "fp8"}).weight_dtype == "fp8"


def test_auto_on_a_dense_checkpoint_is_bf16_so_a_preset_keeps_its_bf16_kv_default():
    cfg = EngineConfig.model_validate({"model": "llama-3-8b", "weight_dtype": "auto", "engine": "trtllm"})
    assert (cfg.weight_dtype, cfg.kv_dtype) == ("bf16", "bf16")
    fp8 = EngineConfig.model_validate({"model": "deepseek-r1", "engine": "trtllm"})
    assert (fp8.weight_dtype, fp8.kv_dtype) == ("auto", "fp8")  # the preset's quantized-checkpoint KV default


def test_memory_sizes_the_fp8_checkpoint_by_default_and_bf16_on_request():
    def weights_gib(*extra):
        result = CliRunner().invoke(app, ["memory", "--model", str(HF_DIR / "deepseek-v3" / "config.json"),
                                          "--hardware", "h200", "--tp", "8", "--json", *extra])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)["weight_bytes_per_gpu"] / 2**30

    assert weights_gib() == pytest.approx(weights_gib("--weight-dtype", "auto"))
    assert 75 < weights_gib() < 85  # 671 B mostly-fp8 weights over 8 GPUs
    bf16 = CliRunner().invoke(app, ["memory", "--model", "deepseek-v3", "--hardware", "h200", "--tp", "8",
                                    "--weight-dtype", "bf16"])
    assert bf16.exit_code == 2 and "does not fit" in bf16.output  # the bf16 cast needs ~160 GiB per GPU


def test_gpt_oss_120b_fits_one_h200_as_stored():
    result = CliRunner().invoke(app, ["memory", "--model", "gpt-oss-120b", "--hardware", "h200", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["num_gpu_blocks"] > 0


def test_the_chosen_dtype_is_described_per_group():
    assert describe_weight_dtype(load_model("llama-3-8b"), "bf16") == "bf16"
    line = describe_weight_dtype(load_model("gpt-oss-120b"), "auto")
    assert line.startswith("auto (as stored: ") and "mxfp4 experts" in line and "bf16 attention" in line


def test_qwen3_235b_fp8_fixture_matches_its_bundled_spec_and_the_bf16_shapes():
    exclude = {"name", "hf_name", "provenance"}
    fp8 = load_model(str(HF_DIR / "qwen3-235b-a22b-fp8" / "config.json"))
    assert fp8.model_dump(exclude=exclude) == load_model("qwen3-235b-a22b-fp8").model_dump(exclude=exclude)
    bf16 = load_model("qwen3-235b-a22b")
    assert fp8.model_dump(exclude=exclude | {"weight_dtypes"}) == bf16.model_dump(exclude=exclude | {"weight_dtypes"})
    assert fp8.weight_dtypes["experts"] == "fp8" and fp8.weight_dtypes["router"] == "bf16"
