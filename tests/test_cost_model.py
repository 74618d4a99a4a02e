"""Roofline cost model: examples that can be checked by hand, and hypothesis properties over every
bundled model x hardware profile x valid TP x random batches (never faster than the roofline, fast
path equal to the explained breakdown, monotone in tokens and context, vectorized decode runs equal
to step-by-step calls)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.cost import CostModel
from sim.cost.block_residues import whole_block_tokens_per_step
from sim.cost.roofline import blend, gemm_time_s
from sim.cost.shapes import attention_load
from sim.errors import InputError
from sim.inputs.dtypes import peak_key
from sim.inputs.hardware import bundled_profiles, load_hardware
from sim.inputs.layout.memory import weight_elements_per_gpu
from sim.inputs.model import ModelSpec, bundled_models, load_model
from sim.inputs.model.params import attention_params, total_params

MODELS, PROFILES = bundled_models(), bundled_profiles()
REL = 1e-9
FAST = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def valid_tps(model: ModelSpec) -> list[int]:
    ok = []
    for tp in (1, 2, 4, 8):
        try:
            model.check_tp(tp)
            ok.append(tp)
        except InputError:
            pass
    return ok


# ---------------------------------------------------------------- examples
def test_llama_3_8b_batch_1_decode_is_memory_bound_near_weights_over_bandwidth():
    model, hw = load_model("llama-3-8b"), load_hardware("h100-sxm")
    step = CostModel(model, hw).breakdown([1], [1024])
    weights_s = total_params(model) * 2 / hw.hbm_bandwidth_bytes_s
    assert weights_s == pytest.approx(4.8e-3, rel=0.01)
    assert step.bound == "memory"
    assert weights_s <= step.time_s <= 1.5 * weights_s
    assert {op.bound for op in step.ops if op.name.endswith("proj")} == {"memory"}


def test_llama_3_8b_4096_token_prefill_is_compute_bound():
    model, hw = load_model("llama-3-8b"), load_hardware("h100-sxm")
    step = CostModel(model, hw).breakdown([4096], [0], n_sampled=1)
    assert step.bound == "compute"
    assert {op.bound for op in step.ops if op.name.endswith("proj")} == {"compute"}
    assert step.time_s >= 2 * 4096 * (total_params(model) - 2 * 128256 * 4096) / hw.peak_flops("dense_bf16_tflops")


def test_allreduce_only_under_tensor_parallelism():
    model, hw = load_model("llama-3-70b"), load_hardware("h100-sxm")
    names = {tp: {op.name for op in CostModel(model, hw, tp).breakdown([8], [100]).ops} for tp in (1, 4)}
    assert "allreduce" not in names[1] and "allreduce" in names[4]


def test_moe_model_has_an_expert_op_instead_of_dense_mlp():
    names = {op.name for op in CostModel(load_model("mixtral-8x7b"), load_hardware("h200")).breakdown([1], [9]).ops}
    assert "moe_mlp" in names and "gate_up_proj" not in names


def test_fp8_weights_need_an_fp8_peak():
    with pytest.raises(InputError):
        CostModel(load_model("llama-3-8b"), load_hardware("a100-80g-sxm"), weight_dtype="fp8")


def test_attention_load_counts_whole_blocks():
    load = attention_load(np.array([1, 5, 1]), np.array([15, 0, 16]), block_size=16)
    assert load.decode_kv_tokens[0] == 16 + 32  # 16 tokens -> one block; 17 tokens -> two
    assert load.prefill_kv_tokens[0] == 16
    assert load.decode_context[0] == pytest.approx(15.5 + 16.5)
    assert load.prefill_pairs[0] == pytest.approx(5 * 2.5)
    assert (load.decode_tokens[0], load.prefill_tokens[0]) == (2, 5)


def test_decode_run_block_crossings_by_hand():
    kv_tokens = whole_block_tokens_per_step(np.array([15, 0, 31]), n_steps=3, block_size=16)
    # lengths per step: 16/17/18, 1/2/3, 32/33/34 -> blocks 1/2/2, 1/1/1, 2/3/3
    assert list(kv_tokens) == [16 * 4, 16 * 6, 16 * 6]


def test_blend_is_a_smooth_max():
    t_c, t_m = np.array([1.0, 0.0, 3.0, 2.0]), np.array([0.0, 0.0, 1.0, 2.0])
    top = np.maximum(t_c, t_m)
    smooth = blend(t_c, t_m, 8.0)
    assert np.all(smooth >= top) and np.all(smooth <= top * 2 ** (1 / 8) + 1e-15)
    assert np.array_equal(blend(t_c, t_m, np.inf), top)


def test_gemm_of_no_tokens_takes_no_time():
    eff = load_hardware("h100-sxm").efficiency
    time_s, _, _ = gemm_time_s(np.array([0, 1]), 4096, 4096, 2, 2, 1e15, 3e12, eff)
    assert time_s[0] == 0 and time_s[1] > 0


@pytest.mark.parametrize("model_name", MODELS)
def test_gemms_read_exactly_the_weights_the_memory_planner_stores(model_name):
    """Weight elements of each GEMM = FLOPs / (2 M). Summed over the step they must equal what one GPU
    stores (memory planner), less the input embedding table, for every valid TP."""
    model = load_model(model_name)
    n_tokens, n_sampled = 7, 3
    for tp in valid_tps(model):
        step = CostModel(model, load_hardware("h200"), tp).breakdown([3, 4], [50, 0], n_sampled=n_sampled)
        ops = {op.name: op for op in step.ops}
        per_layer = sum(op.flops / (2 * n_tokens) for op in step.ops if op.name.endswith("proj"))
        if model.moe:
            per_layer += model.n_experts * ops["moe_mlp"].flops / (2 * n_tokens * model.n_active_experts)
            # the router of each MoE layer (dense-first-k layers have none; Mixtral: every layer)
            per_layer += model.hidden_size * model.n_experts * model.n_moe_layers / model.n_layers
        lm_head = ops["lm_head"].flops / (2 * n_sampled)
        input_table = -(-model.embedding_params // tp) - (model.vocab_size // tp) * model.hidden_size
        expected = weight_elements_per_gpu(model, tp) - input_table
        assert model.n_layers * per_layer + lm_head == pytest.approx(expected, rel=REL), tp


def test_second_new_token_over_long_context_never_speeds_the_step_up():
    cost = CostModel(load_model("llama-3-8b"), load_hardware("h100-sxm"), block_size=16)
    one = cost.step_time_s(np.array([1]), np.array([100_000]), 1)
    two = cost.step_time_s(np.array([2]), np.array([100_000]), 1)
    assert two >= one


def test_gemm_with_tile_quantization_is_monotone_in_tokens():
    hw = load_hardware("h100-sxm")
    eff = hw.efficiency.model_copy(update={"gemm_tile_tokens": 64})
    m_tokens = np.arange(1, 200)
    time_s, _, _ = gemm_time_s(m_tokens, 8192, 8192, 2, 2, hw.peak_flops("dense_bf16_tflops"),
                               hw.hbm_bandwidth_bytes_s, eff)
    assert np.all(np.diff(time_s) >= 0)


def test_hot_path_equals_breakdown_with_an_idle_sequence():
    cost = CostModel(load_model("llama-3-8b"), load_hardware("h100-sxm"))
    new, cached = np.array([5, 0]), np.array([0, 4000])
    assert cost.step_time_s(new, cached, 1) == pytest.approx(cost.breakdown(new, cached, 1).time_s, rel=REL)


def test_decode_run_of_no_sequences_costs_the_step_overhead():
    cost = CostModel(load_model("llama-3-8b"), load_hardware("h100-sxm"))
    with np.errstate(all="ignore"):
        run = cost.decode_run_times_s(np.array([], dtype=np.int64), 3)
    empty = cost.step_time_s(np.array([], dtype=np.int64), np.array([], dtype=np.int64), 0)
    np.testing.assert_allclose(run, [empty] * 3, rtol=REL)


# ---------------------------------------------------------------- properties
@st.composite
def batches(draw, max_seqs=24):
    """(new tokens, cached tokens) per sequence: a mix of decodes (1 new token) and prefill chunks."""
    n = draw(st.integers(1, max_seqs))
    new = draw(st.lists(st.one_of(st.just(1), st.integers(2, 2048)), min_size=n, max_size=n))
    cached = draw(st.lists(st.integers(0, 20_000), min_size=n, max_size=n))
    return np.array(new, dtype=np.int64), np.array(cached, dtype=np.int64)


@st.composite
def configs(draw, model_name, hw_name, tiles=(None,)):
    model, hw = load_model(model_name), load_hardware(hw_name)
    tile = draw(st.sampled_from(tiles))  # GEMM tile quantization of M (None: off, the default)
    updates = {"gemm_tile_tokens": tile}
    if draw(st.booleans()):  # sometimes compute-bound attention, so every term of the formulas shows
        updates["attention_compute"] = 1e-4
    hw = hw.model_copy(update={"efficiency": hw.efficiency.model_copy(update=updates)})
    tp = draw(st.sampled_from(valid_tps(model)))
    block = draw(st.one_of(st.sampled_from([8, 16, 32, 128]), st.integers(1, 256)))
    weight_dtypes = ["bf16"] + (["fp8"] if hw.compute.dense_fp8_tflops else [])
    weight_dtype = draw(st.sampled_from(weight_dtypes))
    kv_dtype = draw(st.sampled_from(["bf16", "fp8"]))
    return CostModel(model, hw, tp, weight_dtype, kv_dtype, block), weight_dtype


def physical_floor_s(cost: CostModel, n_tokens: int, n_sampled: int, peak: float) -> float:
    """Independent whole-step floor: every GPU reads at least its share of the layer weights and the
    LM head (active experts only for MoE) and does at least its share of the matmul FLOPs."""
    m, tp = cost.model, cost.tp
    layer_params = attention_params(m) + m.n_active_experts * m.expert_params
    weight_bytes = (m.n_layers * layer_params + m.vocab_size * m.hidden_size) / tp * cost.weight_bytes_el
    flops = 2.0 * (n_tokens * m.n_layers * layer_params + n_sampled * m.vocab_size * m.hidden_size) / tp
    return max(weight_bytes / cost.bandwidth, flops / peak)


@pytest.mark.parametrize("hw_name", PROFILES)
@pytest.mark.parametrize("model_name", MODELS)
def test_never_faster_than_the_roofline(model_name, hw_name):
    @FAST
    @given(configs(model_name, hw_name, tiles=(None, None, 16, 64, 128)), batches())
    def check(config, batch):
        cost, weight_dtype = config
        new, cached = batch
        peak = cost.hw.peak_flops(peak_key(weight_dtype))  # >= the peak of every op in this config
        step = cost.breakdown(new, cached)
        total_flops = total_bytes = 0.0
        for op in step.ops:
            bandwidth = cost.hw.gpu_link_bytes_s if op.bound == "network" else cost.bandwidth
            assert op.time_s >= max(op.flops / peak, op.bytes / bandwidth) * (1 - REL), op
            weight = cost.model.n_layers if op.per_layer else 1
            total_flops += op.flops * weight
            total_bytes += 0.0 if op.bound == "network" else op.bytes * weight
        assert step.time_s >= max(total_flops / peak, total_bytes / cost.bandwidth)
        assert step.time_s >= physical_floor_s(cost, int(new.sum()), len(new), peak) * (1 - REL)
        assert cost.step_time_s(new, cached, len(new)) == pytest.approx(step.time_s, rel=REL)

    check()


@FAST
@given(st.sampled_from(MODELS), st.sampled_from(PROFILES), st.data())
def test_more_tokens_or_context_never_makes_a_step_faster(model_name, hw_name, data):
    cost, _ = data.draw(configs(model_name, hw_name))
    new, cached = data.draw(batches(max_seqs=16))
    base = cost.step_time_s(new, cached, len(new))
    more_context = cached + data.draw(st.lists(st.integers(0, 5000), min_size=len(new), max_size=len(new)))
    assert cost.step_time_s(new, more_context, len(new)) >= base * (1 - REL)
    # more new tokens for sequences already prefilling (decodes stay decodes: see the xfail above)
    extra = np.array(data.draw(st.lists(st.integers(0, 3000), min_size=len(new), max_size=len(new))))
    more_new = np.where(new > 1, new + extra, new)
    assert cost.step_time_s(more_new, cached, len(new)) >= base * (1 - REL)
    # one more sequence, decoding or prefilling
    q_extra, c_extra = data.draw(st.sampled_from([1, 2, 700])), data.draw(st.integers(0, 9000))
    longer = cost.step_time_s(np.append(new, q_extra), np.append(cached, c_extra), len(new) + 1)
    assert longer >= base * (1 - REL)


@settings(max_examples=80, deadline=None)
@given(
    contexts=st.lists(st.integers(0, 4000), min_size=1, max_size=40),
    n_steps=st.integers(1, 90),
    block=st.one_of(st.integers(1, 40), st.sampled_from([16, 64, 128, 256])),
)
def test_decode_run_block_tokens_equal_brute_force(contexts, n_steps, block):
    ctx = np.array(contexts, dtype=np.int64)
    kv_tokens = whole_block_tokens_per_step(ctx, n_steps, block)
    lengths = ctx[None, :] + np.arange(n_steps)[:, None] + 1  # step x sequence
    expected = (-(-lengths // block) * block).sum(axis=1)
    assert kv_tokens.shape == (n_steps,)
    assert np.array_equal(kv_tokens, expected.astype(np.float64))
    for step in (0, n_steps // 2, n_steps - 1):
        one = attention_load(np.ones_like(ctx), ctx + step, block)
        assert one.decode_kv_tokens[0] == kv_tokens[step]


@settings(max_examples=40, deadline=None)
@given(
    model_name=st.sampled_from(MODELS),
    hw_name=st.sampled_from(PROFILES),
    contexts=st.lists(st.integers(0, 3000), min_size=1, max_size=32),
    n_steps=st.integers(1, 70),
    block=st.integers(1, 160),
    data=st.data(),
)
def test_decode_run_equals_separate_steps(model_name, hw_name, contexts, n_steps, block, data):
    model, hw = load_model(model_name), load_hardware(hw_name)
    if data.draw(st.booleans()):  # make decode attention compute-bound, so its query-key pairs count too
        hw = hw.model_copy(update={"efficiency": hw.efficiency.model_copy(update={"attention_compute": 1e-4})})
    cost = CostModel(model, hw, data.draw(st.sampled_from(valid_tps(model))), block_size=block)
    ctx = np.array(contexts, dtype=np.int64)
    run = cost.decode_run_times_s(ctx, n_steps)
    ones = np.ones_like(ctx)
    stepwise = [cost.step_time_s(ones, ctx + s, len(ctx)) for s in range(n_steps)]
    assert run.shape == (n_steps,)
    np.testing.assert_allclose(run, stepwise, rtol=REL)
    assert np.all(np.diff(run) >= -REL * run[:-1]), "a decode step never gets faster as contexts grow"


@FAST
@given(
    model_name=st.sampled_from(MODELS),
    hw_name=st.sampled_from(PROFILES),
    contexts=st.lists(st.integers(0, 3000), min_size=1, max_size=200),
    n_steps=st.integers(1, 90),
    block=st.integers(1, 64),
    horizon_steps=st.floats(0.0, 80.0),
)
def test_scalar_decode_steps_until_equal_the_array_run_cut_at_the_horizon(model_name, hw_name, contexts, n_steps,
                                                                          block, horizon_steps):
    """The plain-Python decode run (few sequences, stops at the step during which the horizon falls)
    gives the array path's times and block tokens, cut exactly where the scheduler cuts them."""
    model, hw = load_model(model_name), load_hardware(hw_name)
    cost = CostModel(model, hw, valid_tps(model)[0], block_size=block)
    ctx = np.array(contexts, dtype=np.int64)
    times, block_tokens = cost.decode_run(ctx, n_steps)
    start_s = 100.0
    horizon_s = start_s + horizon_steps * float(times[0])
    max_steps = 64
    scalar = cost._hot.decode_steps_until(contexts, n_steps, start_s, horizon_s, max_steps)
    ends = np.cumsum(times) + start_s
    k = min(n_steps, int(np.searchsorted(ends, horizon_s)) + 1)
    if k > max_steps:
        assert scalar is None
        return
    assert scalar is not None
    assert len(scalar[0]) == k
    np.testing.assert_allclose(scalar[0], times[:k], rtol=1e-12)
    assert scalar[1] == block_tokens[:k].tolist()
