"""Cost of today's architectures: routed experts over the experts a step touches, dense-first-k
layers, MLA latent attention, per-group weight dtypes, FP4 per GPU, MTP drafts."""

from __future__ import annotations

import numpy as np
import pytest

from sim.cost import CostModel
from sim.cost.moe import experts_touched
from sim.cost.mtp import MTPDraft, mtp_module_spec
from sim.errors import InputError
from sim.inputs.hardware import load_hardware
from sim.inputs.layout.memory import plan_memory
from sim.inputs.model import load_model


def ops_of(step):
    return {op.name: op for op in step.ops}


def test_experts_touched_matches_random_routing():
    rng = np.random.default_rng(0)
    n, k, batch = 16, 2, 5
    distinct = [len({e for _ in range(batch) for e in rng.choice(n, k, replace=False)}) for _ in range(20_000)]
    assert experts_touched(np.array([batch]), n, k)[0] == pytest.approx(np.mean(distinct), rel=1e-2)
    assert experts_touched(np.array([1]), 256, 8)[0] == pytest.approx(8.0)
    assert experts_touched(np.array([4096]), 256, 8)[0] == pytest.approx(256.0)


@pytest.fixture(scope="module")
def deepseek():
    return CostModel(load_model("deepseek-v3"), load_hardware("h200"), 8, weight_dtype="auto")


def test_uniform_routing_bounds_the_experts_a_skewed_router_touches():
    """Why load imbalance enters no term under TP (sim/cost/moe.py): a skewed router (Zipf expert
    popularity) touches fewer distinct experts than the uniform formula, so it reads fewer weights
    and, with compute time affine in each expert's tokens, computes no longer."""
    rng = np.random.default_rng(1)
    n, k = 128, 8
    popularity = 1.0 / np.arange(1, n + 1) ** 0.8
    popularity /= popularity.sum()
    for tokens in (4, 32, 256):
        # top-k without replacement by the Gumbel trick: 100 steps of `tokens` tokens each
        keys = np.log(popularity) + rng.gumbel(size=(100, tokens, n))
        chosen = np.argpartition(-keys, k, axis=-1)[..., :k].reshape(100, -1)
        touched = [np.unique(step).size for step in chosen]
        assert np.mean(touched) < experts_touched(tokens, n, k)


def test_small_moe_decode_is_memory_bound_on_the_active_experts(deepseek):
    m = deepseek.model
    moe = ops_of(deepseek.breakdown([1], [1000]))["moe_mlp"]
    one_expert_bytes = m.expert_params / 8 * 1  # fp8, one TP-8 shard
    per_layer_share = m.n_moe_layers / m.n_layers
    assert moe.bound == "memory"
    weights = moe.bytes / per_layer_share
    assert 8 * one_expert_bytes <= weights < 8.1 * one_expert_bytes  # top-8 experts (+ activations), not 256
    all_experts_s = 256 * one_expert_bytes / deepseek.bandwidth
    assert moe.time_s / per_layer_share < 0.15 * all_experts_s  # 8 of 256 experts' bytes plus kernel launches


def test_prefill_reads_every_expert(deepseek):
    m = deepseek.model
    moe = ops_of(deepseek.breakdown([4096], [0], n_sampled=1))["moe_mlp"]
    assert moe.bytes / (m.n_moe_layers / m.n_layers) >= 255.9 * m.expert_params / 8


def test_dense_first_k_layers_are_dense_and_priced_by_their_share(deepseek):
    t = 7
    ops = ops_of(deepseek.breakdown([t], [0], n_sampled=1))
    dense_share, moe_share = 3 / 61, 58 / 61
    assert ops["gate_up_proj"].flops == pytest.approx(2 * t * (2 * 18432 // 8) * 7168 * dense_share)
    assert ops["shared_gate_up_proj"].flops == pytest.approx(2 * t * (2 * 2048 // 8) * 7168 * moe_share)
    assert ops["router"].flops == pytest.approx(2 * t * 256 * 7168 * moe_share)
    assert ops["moe_mlp"].flops == pytest.approx(2 * t * 8 * 3 * 7168 * 2048 / 8 * moe_share)


def test_mla_caches_the_latent_and_absorbs_weights_in_decode(deepseek):
    assert deepseek.kv_bytes_per_token_layer_gpu == (512 + 64) * 2  # replicated on every rank
    ops = ops_of(deepseek.breakdown([1], [4096]))
    assert {"q_a_proj", "q_b_proj", "kv_a_proj", "kv_b_proj", "o_proj"} <= set(ops)
    decode = ops["decode_attention"]
    kv_tokens = -(-4097 // 16) * 16
    assert decode.bytes >= kv_tokens * 1152
    # 16 heads per GPU, each scoring the 576-wide latent and summing the 512-wide one
    assert decode.flops == pytest.approx(16 * (2 * 576 + 2 * 512) * (4096 + 0.5))
    prefill = ops_of(deepseek.breakdown([512], [0], n_sampled=1))["prefill_attention"]
    assert prefill.flops == pytest.approx(16 * (2 * 192 + 2 * 128) * 512 * 256)


def test_mla_prefill_re_expands_the_cached_latents_of_prefill_sequences(deepseek):
    # vLLM's MLA prefill up-projects every prefill sequence's cached latents (kv_b) each step
    step = ops_of(deepseek.breakdown([100, 300, 1], [16000, 2000, 9000], n_sampled=3))
    ctx = step["kv_b_proj_context"]
    assert ctx.flops == pytest.approx(2 * (16000 + 2000) * 512 * 16 * (128 + 128))  # decodes re-expand nothing
    # a short suffix over a long cached prefix: the re-expansion outweighs the attention itself
    one = ops_of(deepseek.breakdown([100], [16000], n_sampled=1))
    assert one["kv_b_proj_context"].time_s > one["prefill_attention"].time_s
    assert "kv_b_proj_context" not in ops_of(deepseek.breakdown([512], [0], n_sampled=1))
    assert "kv_b_proj_context" not in ops_of(deepseek.breakdown([1] * 8, [4096] * 8))


@pytest.mark.parametrize("n_seqs", [5, 40])  # 40: above SCALAR_MAX_SEQS, the array path
def test_mla_hot_path_equals_its_scalar_twin_and_the_breakdown(deepseek, n_seqs):
    rng = np.random.default_rng(n_seqs)
    q = rng.choice([1, 1, 7, 64, 300], size=n_seqs)
    c = rng.integers(0, 20000, size=n_seqs)
    hot = deepseek._hot
    assert hot.step_parts(q, c) == hot.step_parts_scalar(q.tolist(), c.tolist())  # bit for bit
    assert deepseek.step_time_s(q, c, n_seqs) == pytest.approx(deepseek.breakdown(q, c, n_seqs).time_s, rel=1e-9)


def test_explicit_fp8_equals_the_checkpoint_dtypes_for_deepseek(deepseek):
    fp8 = CostModel(deepseek.model, deepseek.hw, 8, weight_dtype="fp8")
    new, cached = np.array([1, 1, 300]), np.array([100, 5000, 0])
    assert fp8.step_time_s(new, cached, 3) == deepseek.step_time_s(new, cached, 3)
    bf16 = CostModel(deepseek.model, deepseek.hw, 8, weight_dtype="bf16")
    assert bf16.step_time_s(new, cached, 3) > deepseek.step_time_s(new, cached, 3)


def test_mxfp4_experts_run_natively_on_b200_and_dequantized_on_h100():
    model = load_model("gpt-oss-120b")
    b200 = CostModel(model, load_hardware("b200"), 1, weight_dtype="auto").group_gemm["experts"]
    h100 = load_hardware("h100-sxm")
    hopper = CostModel(model, h100, 1, weight_dtype="auto").group_gemm["experts"]
    assert b200.peak_flops == load_hardware("b200").peak_flops("dense_fp8_tflops")  # W4A8 (MXFP8 activations)
    assert hopper.peak_flops == pytest.approx(h100.peak_flops("dense_bf16_tflops") / 1.15)  # w4a16 dequant
    assert hopper.bytes_el == b200.bytes_el == 0.53125


def test_mtp_draft_is_one_decoder_layer_of_the_model():
    target = CostModel(load_model("deepseek-v3"), load_hardware("h200"), 8, weight_dtype="auto")
    module = mtp_module_spec(target.model)
    assert module.n_layers == 1 and module.n_moe_layers == 1 and module.mla is not None
    contexts = np.full(32, 2000)
    draft_s = MTPDraft(target, k=1).time_s(contexts)
    step_s = target.step_time_s(np.ones(32, dtype=np.int64), contexts, 32)
    assert step_s / 61 < draft_s < step_s / 10  # one layer, its LM head and eh_proj; not a guessed fraction
    with pytest.raises(InputError, match="MTP"):
        mtp_module_spec(load_model("qwen3-30b-a3b"))


def test_mtp_weights_and_kv_join_the_memory_plan():
    model, hw = load_model("deepseek-v3"), load_hardware("h200")
    plain = plan_memory(model, hw, 8, weight_dtype="auto")
    with_mtp = plan_memory(model, hw, 8, weight_dtype="auto", mtp=True)
    assert with_mtp.weight_bytes_per_gpu - plain.weight_bytes_per_gpu == pytest.approx(11.6e9 / 8, rel=3e-2)
    assert with_mtp.kv_bytes_per_token_per_gpu == plain.kv_bytes_per_token_per_gpu * 62 // 61
