"""Memory planner: KV bytes per token, weights per GPU and the exact KV block count."""

from __future__ import annotations

import pytest

from sim.errors import InputError
from sim.inputs.hardware import GIB, load_hardware
from sim.inputs.layout.memory import plan_memory
from sim.inputs.model import load_model
from sim.inputs.model.params import total_params


def plan(model="llama-3-8b", hardware="h100-sxm", **kwargs):
    return plan_memory(load_model(model), load_hardware(hardware), **kwargs)


@pytest.mark.parametrize(("model", "tp", "kv_bytes"), [
    ("llama-3-70b", 4, 327_680),
    ("llama-3-70b", 8, 327_680),
    ("llama-3-8b", 1, 131_072),
    ("llama-2-7b", 2, 524_288),
])
def test_kv_bytes_per_token_is_for_the_whole_replica(model, tp, kv_bytes):
    result = plan(model, tp=tp)
    assert result.kv_bytes_per_token == kv_bytes
    assert result.kv_bytes_per_token_per_gpu == kv_bytes // tp


def test_fp8_kv_cache_halves_kv_bytes_and_about_doubles_blocks():
    bf16 = plan("llama-3-70b", tp=4)
    fp8 = plan("llama-3-70b", tp=4, kv_dtype="fp8")
    assert fp8.kv_bytes_per_token * 2 == bf16.kv_bytes_per_token
    assert fp8.weight_bytes_per_gpu == bf16.weight_bytes_per_gpu
    assert fp8.num_gpu_blocks in (2 * bf16.num_gpu_blocks, 2 * bf16.num_gpu_blocks + 1)


def test_kv_heads_replicate_when_tp_exceeds_them():
    # Llama-3-8B has 8 KV heads: at tp=16 every GPU still holds one whole KV head per layer.
    result = plan("llama-3-8b", tp=16)
    assert result.kv_bytes_per_token_per_gpu == 2 * 32 * 1 * 128 * 2
    assert result.kv_bytes_per_token == 131_072


def test_llama_3_8b_block_count_by_hand():
    """floor((HBM*util - runtime reserve - weights/GPU - activation reserve) / (B * KV bytes/token/GPU))."""
    hw = load_hardware("h100-sxm")
    # weights: 32 layers x (QKV 4096x(32+2*8)x128 + O 4096x4096 + MLP 3x4096x14336) + 2 x 128256x4096 embeddings
    weight_bytes = (32 * (4096 * 48 * 128 + 4096 * 4096 + 3 * 4096 * 14336) + 2 * 128256 * 4096) * 2
    assert weight_bytes == 16_059_990_016
    # activations: 8192 batched tokens x (QKV 48x128 + MLP 3x14336 + 4x4096) bf16 values + fp32 logits of 256 rows
    activation_bytes = 8192 * (48 * 128 + 3 * 14336 + 4 * 4096) * 2 + 256 * 128256 * 4
    runtime_bytes = int(hw.memory.runtime_reserve_gib * GIB)
    usable_bytes = int(hw.memory.hbm_capacity_gib * GIB * 0.9)
    kv_per_token_gpu = 2 * 32 * 8 * 128 * 2
    expected = (usable_bytes - runtime_bytes - weight_bytes - activation_bytes) // (16 * kv_per_token_gpu)

    result = plan("llama-3-8b", tp=1, block_size=16, gpu_memory_utilization=0.9,
                  max_num_batched_tokens=8192, max_num_seqs=256)
    assert result.weight_bytes_per_gpu == weight_bytes
    assert result.activation_reserve_bytes_per_gpu == activation_bytes
    assert result.num_gpu_blocks == expected
    assert result.max_cached_tokens == expected * 16
    assert result.kv_cache_bytes_per_gpu == expected * 16 * kv_per_token_gpu
    assert 0 < usable_bytes - runtime_bytes - weight_bytes - activation_bytes - result.kv_cache_bytes_per_gpu \
        < 16 * kv_per_token_gpu


def test_llama_3_70b_weights_per_gpu_at_tp4_by_hand():
    # per layer per GPU: QKV 8192x(16+2*2)x128, O (16x128)x8192, MLP 3x8192x28672/4; embeddings split 4 ways
    layer = 8192 * 20 * 128 + 16 * 128 * 8192 + 3 * 8192 * 28672 // 4
    expected = (80 * layer + 2 * 128256 * 8192 // 4) * 2
    assert plan("llama-3-70b", tp=4).weight_bytes_per_gpu == expected


def test_weight_dtype_scales_weights():
    bf16, fp8 = plan("llama-3-8b"), plan("llama-3-8b", weight_dtype="fp8")
    assert fp8.weight_bytes_per_gpu * 2 == bf16.weight_bytes_per_gpu
    assert fp8.num_gpu_blocks > bf16.num_gpu_blocks


def test_moe_stores_every_expert():
    model = load_model("mixtral-8x7b")
    assert plan("mixtral-8x7b", "h200").weight_bytes_per_gpu == total_params(model) * 2


def test_more_memory_more_gpus_more_blocks():
    assert plan(gpu_memory_utilization=0.95).num_gpu_blocks > plan(gpu_memory_utilization=0.8).num_gpu_blocks
    by_tp = [plan("llama-3-70b", tp=tp).max_cached_tokens for tp in (2, 4, 8)]
    assert by_tp == sorted(by_tp) and len(set(by_tp)) == 3
    assert plan(hardware="h200").num_gpu_blocks > plan(hardware="h100-sxm").num_gpu_blocks


def test_block_size_only_changes_rounding():
    tokens = {b: plan(block_size=b).max_cached_tokens for b in (1, 16, 32, 128)}
    assert all(tokens[1] - 128 < t <= tokens[1] for t in tokens.values())


def test_weights_that_do_not_fit_are_refused():
    with pytest.raises(InputError) as info:
        plan("llama-3-70b", "l40s", tp=1)
    line = info.value.line()
    assert "does not fit" in line and "l40s" in line and "\n" not in line


@pytest.mark.parametrize(("kwargs", "where"), [
    ({"gpu_memory_utilization": 0.0}, "--gpu-memory-utilization"),
    ({"gpu_memory_utilization": 1.5}, "--gpu-memory-utilization"),
    ({"block_size": 0}, "--block-size"),
    ({"tp": 3}, "--tp"),
    ({"kv_dtype": "fp4"}, "--kv-dtype"),
])
def test_bad_settings_name_the_option(kwargs, where):
    with pytest.raises(InputError) as info:
        plan(**kwargs)
    assert info.value.where == where
