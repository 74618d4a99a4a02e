"""Model specs: bundled YAMLs, parameter counts, KV sizes, HF config.json loading and its errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.errors import InputError
from sim.inputs.dtypes import bytes_per_element, peak_key
from sim.inputs.model import bundled_models, load_model
from sim.inputs.model.kv import kv_elements_per_token
from sim.inputs.model.params import active_params, total_params

HF_DIR = Path(__file__).parent / "fixtures" / "hf"
REQUIRED_MODELS = {
    "llama-2-7b", "llama-2-70b", "llama-3-8b", "llama-3-70b", "codellama-34b", "mistral-7b",
    "qwen2.5-7b", "qwen2.5-72b", "mixtral-8x7b",
}
# Published parameter counts (model cards / safetensors totals); the spec leaves out the norm
# weights (< 0.01 %), so 0.2 % is tight enough to catch any wrong shape.
PUBLISHED_PARAMS = {
    "llama-3-8b": 8.030e9,
    "llama-3-70b": 70.55e9,
    "llama-2-7b": 6.738e9,
    "llama-2-70b": 68.98e9,
    "mistral-7b": 7.242e9,
    "qwen2.5-7b": 7.616e9,
    "mixtral-8x7b": 46.70e9,
}
SPEC_ONLY_FIELDS = {"name", "hf_name", "provenance"}


def test_every_required_model_is_bundled():
    assert set(bundled_models()) >= REQUIRED_MODELS


@pytest.mark.parametrize("name", bundled_models())
def test_bundled_model_loads_and_is_consistent(name):
    model = load_model(name)
    assert model.name == name
    assert model.n_heads % model.n_kv_heads == 0, "GQA groups must be whole"
    assert active_params(model) <= total_params(model)
    assert model.provenance.strip()


@pytest.mark.parametrize(("name", "params"), sorted(PUBLISHED_PARAMS.items()))
def test_parameter_counts_match_published(name, params):
    assert total_params(load_model(name)) == pytest.approx(params, rel=2e-3)


def test_dense_models_use_all_their_parameters():
    model = load_model("llama-3-8b")
    assert active_params(model) == total_params(model)


def test_mixtral_total_vs_active_parameters():
    model = load_model("mixtral-8x7b")
    assert total_params(model) == pytest.approx(46.7e9, rel=5e-3)
    assert active_params(model) == pytest.approx(12.9e9, rel=5e-3)


@pytest.mark.parametrize(("name", "kv_elements"), [
    ("llama-3-8b", 2 * 32 * 8 * 128),
    ("llama-3-70b", 2 * 80 * 8 * 128),
    ("llama-2-7b", 2 * 32 * 32 * 128),  # no GQA
    ("qwen2.5-7b", 2 * 28 * 4 * 128),
])
def test_kv_elements_per_token(name, kv_elements):
    assert kv_elements_per_token(load_model(name)) == kv_elements


def test_llama_3_70b_kv_bytes_per_token_bf16():
    assert kv_elements_per_token(load_model("llama-3-70b")) * bytes_per_element("bf16") == 327_680


def test_tp_must_split_heads():
    llama = load_model("llama-3-8b")  # 32 heads, 8 KV heads
    for tp in (1, 2, 4, 8, 16):
        llama.check_tp(tp)
    assert llama.kv_heads_per_gpu(4) == 2
    assert llama.kv_heads_per_gpu(16) == 1  # replicated beyond the KV heads
    for tp in (0, 3, 6):
        with pytest.raises(InputError) as info:
            llama.check_tp(tp)
        assert info.value.where == "--tp"
    with pytest.raises(InputError):
        load_model("qwen2.5-7b").check_tp(8)  # 28 heads


def test_dtypes_table():
    assert bytes_per_element("bf16") == bytes_per_element("fp16") == 2
    assert bytes_per_element("fp8") == bytes_per_element("int8") == 1
    assert peak_key("fp8") == "dense_fp8_tflops"
    with pytest.raises(InputError) as info:
        bytes_per_element("fp7", "--kv-dtype")
    assert info.value.where == "--kv-dtype" and "fp8" in info.value.allowed


# ---------------------------------------------------------------- Hugging Face config.json
@pytest.mark.parametrize("name", ["llama-3-8b", "mixtral-8x7b", "qwen2.5-7b"])
def test_hf_config_matches_bundled_yaml(name):
    from_hf = load_model(str(HF_DIR / name / "config.json")).model_dump(exclude=SPEC_ONLY_FIELDS)
    from_yaml = load_model(name).model_dump(exclude=SPEC_ONLY_FIELDS)
    assert from_hf == from_yaml


def test_hf_config_name_comes_from_its_folder():
    assert load_model(str(HF_DIR / "llama-3-8b" / "config.json")).name == "llama-3-8b"


def test_malformed_config_json_is_an_input_error():
    path = HF_DIR / "bad-json" / "config.json"
    with pytest.raises(InputError) as info:
        load_model(str(path))
    assert info.value.where == str(path) and "JSON" in info.value.allowed


def test_config_json_without_layers_names_the_key():
    path = HF_DIR / "no-layers" / "config.json"
    with pytest.raises(InputError) as info:
        load_model(str(path))
    assert info.value.where == str(path) and info.value.field == "num_hidden_layers"


def test_unknown_model_lists_the_bundled_ones():
    with pytest.raises(InputError) as info:
        load_model("llama-9-1t")
    assert info.value.where == "--model" and "llama-3-8b" in info.value.allowed


def test_missing_model_file(tmp_path):
    with pytest.raises(InputError, match="not found"):
        load_model(str(tmp_path / "config.json"))


def test_user_yaml_with_a_bad_field(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text("name: tiny\nn_layers: 0\nhidden_size: 64\nn_heads: 4\nn_kv_heads: 4\nhead_dim: 16\n"
                    "intermediate_size: 128\nvocab_size: 100\nmax_position_embeddings: 512\n")
    with pytest.raises(InputError) as info:
        load_model(str(path))
    assert info.value.field == "n_layers"
