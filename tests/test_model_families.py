"""One test per config.json model_type family, on the published configs shipped in tests/fixtures/hf/
(tests/fixtures/hf/README.md names their sources): parameter counts against the model cards, layer
groups, MLA / sliding-window KV, and the checkpoint's per-group weight dtypes."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.inputs.dtypes import bytes_per_element
from sim.inputs.hardware import load_hardware
from sim.inputs.layout.memory import plan_memory
from sim.inputs.model import load_model
from sim.inputs.model.kv import kv_bytes_per_sequence, kv_elements_per_token
from sim.inputs.model.params import active_params, mtp_params, total_params

HF_DIR = Path(__file__).parent / "fixtures" / "hf"


def hf(name: str):
    return load_model(str(HF_DIR / name / "config.json"))


# (fixture, published total params, published active params or None, rel tolerance)
PUBLISHED = [
    ("deepseek-v3", 671e9, None, 2e-3),  # DeepSeek README_WEIGHTS.md: 671 B main model
    ("qwen3-30b-a3b", 30.5e9, 3.3e9, 2e-2),  # Qwen3 card: 30.5 B total, 3.3 B activated
    ("qwen3-235b-a22b", 235e9, 22e9, 1e-2),
    ("qwen3-8b", 8.2e9, None, 1e-2),
    ("qwen3-32b", 32.8e9, None, 1e-2),
    ("gpt-oss-120b", 116.8e9, None, 2e-3),  # OpenAI model card
    ("gpt-oss-20b", 20.9e9, None, 2e-3),
    ("kimi-k2", 1.04e12, 32e9, 2.5e-2),  # Moonshot card: 1 T total (1.04 T), 32 B activated
    ("glm-4.5-air", 106e9, None, 1e-2),
    ("llama-4-maverick", 400e9, 17e9, 1e-2),
]


@pytest.mark.parametrize(("name", "total", "active", "rel"), PUBLISHED)
def test_parameter_counts_match_the_model_cards(name, total, active, rel):
    model = hf(name)
    assert total_params(model) == pytest.approx(total, rel=rel)
    if active is not None:
        assert active_params(model) == pytest.approx(active, rel=rel)


def test_deepseek_v3_mla_moe_mtp_and_fp8():
    m = hf("deepseek-v3")
    assert m.mla is not None and m.mla.kv_lora_rank == 512 and m.mla.qk_rope_head_dim == 64
    assert kv_elements_per_token(m) * bytes_per_element("bf16") == 70_272  # 61 x (512 + 64) x 2
    assert m.moe.dense_layers == [0, 1, 2] and m.n_moe_layers == 58 and m.moe.n_shared_experts == 1
    assert m.expert_intermediate_size == 2048 and m.intermediate_size == 18432
    assert m.mtp_layers == 1 and mtp_params(m) == pytest.approx(11.5e9, rel=2e-2)  # README_WEIGHTS: 11.5 B
    assert m.weight_dtypes["experts"] == "fp8" and m.weight_dtypes["embedding"] == "bf16"
    assert [(g["n_layers"], g["mlp"]) for g in m.layer_groups()] == [(3, "dense"), (58, "moe")]


def test_deepseek_v3_fp8_weights_at_tp8_match_the_checkpoint():
    """671 B parameters x 1 B (fp8) / 8 GPUs, plus the bf16 embeddings, LM head and router."""
    m = hf("deepseek-v3")
    plan = plan_memory(m, load_hardware("h200"), tp=8, weight_dtype="auto")
    assert plan.weight_bytes_per_gpu == pytest.approx(total_params(m) / 8, rel=2e-2)
    assert plan.kv_bytes_per_token == 70_272 and plan.kv_bytes_per_token_per_gpu == 70_272  # latent replicated
    fp8 = plan_memory(m, load_hardware("h200"), tp=8, weight_dtype="fp8")
    assert fp8.weight_bytes_per_gpu == plan.weight_bytes_per_gpu


def test_kimi_k2_reads_as_deepseek_v3_with_384_experts():
    m = hf("kimi-k2")
    assert m.mla is not None and m.moe.n_experts == 384 and m.moe.dense_layers == [0] and m.mtp_layers == 0


def test_qwen3_moe_reads_num_experts_and_moe_width():
    m = hf("qwen3-30b-a3b")
    assert (m.moe.n_experts, m.moe.experts_per_token, m.expert_intermediate_size) == (128, 8, 768)
    assert m.moe.dense_layers == [] and m.moe.n_shared_experts == 0


def test_gpt_oss_alternates_sliding_and_full_layers_with_mxfp4_experts():
    m = hf("gpt-oss-120b")
    assert m.n_layers_of("sliding") == m.n_layers_of("full") == 18 and m.window_tokens == 128
    assert m.attention_sinks and m.weight_dtypes == {"router": "bf16", "embedding": "bf16", "experts": "mxfp4"}


def test_gpt_oss_kv_at_128k_is_about_half_the_all_full_attention_figure():
    m = hf("gpt-oss-120b")
    context = 131_072
    hybrid = kv_bytes_per_sequence(m, context, 2, 16)
    all_full = kv_elements_per_token(m) * 2 * context  # every layer keeping every token
    assert all_full == 36 * 2 * 8 * 64 * 2 * context
    # 18 full layers keep every token, 18 sliding layers ceil(127 / 16) + 1 = 9 blocks
    assert hybrid == 18 * 2 * 8 * 64 * 2 * (context + 9 * 16)
    assert hybrid / all_full == pytest.approx(0.5, abs=1e-3)


def test_llama4_chunked_local_layers_moe_interleave_and_vision_tower():
    scout, maverick = hf("llama-4-scout"), hf("llama-4-maverick")
    assert scout.n_layers_of("chunked") == 36 and scout.n_layers_of("full") == 12 and scout.window_tokens == 8192
    assert scout.n_moe_layers == 48 and scout.moe.n_shared_experts == 1
    assert maverick.n_moe_layers == 24 and maverick.moe.dense_layers[:3] == [0, 2, 4]
    assert maverick.intermediate_size == 16384 and maverick.expert_intermediate_size == 8192
    assert total_params(scout) + scout.extra_weight_params == pytest.approx(109e9, rel=1e-2)  # Meta: 109 B


def test_llama4_scout_fp8_dynamic_resave_reads_as_the_instruct_spec_with_fp8_mlps():
    """RedHatAI's re-save (fixture README) writes `no_rope_layers: []` (transformers' default layers) and
    ignores the vision tower and attention in its compressed-tensors config."""
    fp8, bf16 = hf("llama-4-scout-fp8-dynamic"), load_model("llama-4-scout")
    assert fp8.layer_attention == bf16.layer_attention and fp8.moe == bf16.moe
    assert fp8.extra_weight_params == bf16.extra_weight_params
    assert fp8.weight_dtypes["experts"] == "fp8" and fp8.weight_dtypes["attention"] == "bf16"


def test_glm45_air_first_dense_layer_shared_expert_and_mtp():
    m = hf("glm-4.5-air")
    assert m.moe.dense_layers == [0] and m.moe.n_shared_experts == 1 and m.mtp_layers == 1 and m.qkv_bias


@pytest.mark.parametrize("name", ["qwen3-8b", "qwen3-32b"])
def test_qwen3_dense_fixture_matches_its_bundled_spec(name):
    exclude = {"name", "hf_name", "provenance"}
    assert hf(name).model_dump(exclude=exclude) == load_model(name).model_dump(exclude=exclude)


def test_memory_cli_reports_a_sequences_kv_against_all_full_attention():
    import json

    from typer.testing import CliRunner

    from sim.cli import app

    result = CliRunner().invoke(app, ["memory", "--model", "gpt-oss-120b", "--hardware", "h100-sxm",
                                      "--weight-dtype", "auto", "--context", "131072", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["kv_bytes_per_sequence_all_full_attention_per_gpu"] == 36 * 2048 * 131072
    assert data["kv_bytes_per_sequence_per_gpu"] == 18 * 2048 * (131072 + 144)
    assert data["kv_window_reserve_bytes_per_gpu"] > 0 and data["kv_bytes_per_token_per_gpu"] == 18 * 2048
