"""Block sizes an engine refuses at start-up are refused with the sizes it takes (issue 45 item 5).

The rules come from each engine's own source (recorded in the preset's `block_sizes.source`): vLLM
V1's attention backends need multiples of 16, TensorRT-LLM's KV block array needs a power of two,
LMDeploy TurboMind multiples of 32 on sm80+; SGLang's --page-size takes any positive int."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.errors import InputError
from sim.inputs.config import load_config
from sim.inputs.engines.preset import engine_versions, load_engine


@pytest.mark.parametrize(("engine", "refused", "taken"), [
    ("vllm", 8, 16), ("vllm", 24, 256), ("vllm@0.10", 8, 128), ("vllm@0.6", 64, 8),
    ("trtllm", 48, 64), ("lmdeploy", 16, 96),
])
def test_a_refused_block_size_names_the_allowed_ones(engine, refused, taken):
    with pytest.raises(InputError) as error:
        load_config(None, {"engine": engine, "block_size": refused})
    assert error.value.where == "--block-size"
    assert f"block_size {refused} is refused" in error.value.line()
    assert load_config(None, {"engine": engine, "block_size": taken}).block_size == taken


def test_vllm_v1_names_its_sizes_and_sglang_takes_any():
    with pytest.raises(InputError, match="16, 32, 64, 128 or 256"):
        load_config(None, {"engine": "vllm@0.15", "block_size": 8})
    assert load_config(None, {"engine": "sglang", "block_size": 8}).block_size == 8
    assert load_config(None, {"block_size": 8}).block_size == 8  # no engine: no engine's rule


def test_every_preset_default_block_size_is_one_its_engine_takes():
    for name in engine_versions():
        preset = load_engine(name)
        assert preset.block_sizes is None or preset.block_sizes.allows(preset.scheduling.block_size), name
        assert preset.block_sizes is None or preset.block_sizes.source


def test_simulate_vllm_block_size_8_exits_2_with_one_line(tmp_path):
    result = CliRunner().invoke(app, ["simulate", "--engine", "vllm", "--block-size", "8", "--trace", "splitwise_conv",
                                      "--max-requests", "5", "--out", str(tmp_path / "run")])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "16, 32, 64, 128 or 256" in lines[0], result.output
    assert not (tmp_path / "run").exists()
