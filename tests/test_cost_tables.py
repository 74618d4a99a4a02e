"""Measured GEMM tables: exact at measured M, monotone between, smooth-model ratio outside."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cost import CostModel
from sim.cost.roofline import gemm_time_s
from sim.cost.tables import gemm_tables, table_entry
from sim.errors import InputError
from sim.inputs.hardware import load_hardware
from sim.inputs.model import load_model

M_MEASURED = np.array([1, 8, 64, 256, 1024])
# every time above the H100 roofline of a 4096 x 4096 bf16 GEMM (M = 1: 33.6 MB at 3.35 TB/s, 10.02 us),
# where the cost model holds a measured time (sim/cost/gemm_grid.py held_at_roofline_s)
TIME_S = np.array([10.5e-6, 11e-6, 30e-6, 90e-6, 400e-6])


def _profile_with_table(n_out: int, k_in: int):
    base = load_hardware("h100-sxm")
    entry = table_entry("o_proj", 1, n_out, k_in, 2, M_MEASURED, TIME_S)
    return base.model_copy(update={"calibration": {"tables": {"gemm": [entry]}}})


@pytest.fixture(scope="module")
def table():
    return next(iter(gemm_tables(_profile_with_table(4096, 4096).calibration, "test").values()))


def _smooth(hw):
    def smooth(m):
        return gemm_time_s(m, 4096, 4096, 2, 2, hw.peak_flops("dense_bf16_tflops"), hw.hbm_bandwidth_bytes_s,
                           hw.efficiency)[0]  # fmt: skip
    return smooth


def test_exact_at_measured_points(table):
    hw = load_hardware("h100-sxm")
    assert np.allclose(table.time_at_s(M_MEASURED, _smooth(hw)), TIME_S, rtol=1e-12)


@settings(max_examples=80, deadline=None)
@given(st.floats(1.0, 1024.0), st.floats(1.0, 1024.0))
def test_monotone_and_bounded_between_points(table, m_a, m_b):
    hw = load_hardware("h100-sxm")
    low, high = sorted((m_a, m_b))
    t_low, t_high = table.time_at_s(np.array([low, high]), _smooth(hw))
    assert t_low <= t_high * (1 + 1e-12)  # these measured times rise with M, so must the table
    i = np.searchsorted(M_MEASURED, low, side="right") - 1
    j = min(i + 1, len(M_MEASURED) - 1)
    assert TIME_S[i] * (1 - 1e-12) <= t_low <= TIME_S[j] * (1 + 1e-12)


def test_outside_the_measured_range_follows_the_smooth_ratio(table):
    hw = load_hardware("h100-sxm")
    smooth = _smooth(hw)
    m_out = np.array([2048.0, 8192.0])
    expected = TIME_S[-1] * smooth(m_out) / smooth(np.array([1024.0]))
    assert np.allclose(table.time_at_s(m_out, smooth), expected, rtol=1e-12)
    # not a linear extrapolation of the last segment in log-log space
    slope = np.log(TIME_S[-1] / TIME_S[-2]) / np.log(1024 / 256)
    linear = TIME_S[-1] * (8192 / 1024) ** slope
    assert abs(table.time_at_s(np.array([8192.0]), smooth)[0] / linear - 1) > 0.05
    assert table.time_at_s(np.array([0.0]), smooth)[0] == 0.0


def test_cost_model_uses_the_table_for_its_shape_only():
    """Llama-2-7B TP 1: o_proj is 4096 x 4096, the table's shape; qkv_proj (12288 x 4096) is not."""
    hw = _profile_with_table(4096, 4096)
    plain = CostModel(load_model("llama-2-7b"), hw.model_copy(update={"calibration": None}))  # no table, no grid
    tabled = CostModel(load_model("llama-2-7b"), hw)
    for m in (1, 64, 1024):
        ops = {op.name: op.time_s for op in tabled.breakdown([m], [0]).ops}
        base_ops = {op.name: op.time_s for op in plain.breakdown([m], [0]).ops}
        assert ops["o_proj"] == pytest.approx(TIME_S[m == M_MEASURED][0], rel=1e-12)
        assert ops["qkv_proj"] == pytest.approx(base_ops["qkv_proj"], rel=1e-12)
    # the hot path's lookup tables see the measured table too
    step = tabled.step_time_s(np.array([64]), np.array([0]), 1)
    assert step == pytest.approx(tabled.breakdown([64], [0]).time_s, rel=1e-9)


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"tp": 1, "n_out": 8, "k_in": 8, "bytes_per_el": 2, "m_tokens": [1, 1], "time_us": [1, 2]}, "m_tokens"),
        ({"tp": 1, "n_out": 8, "k_in": 8, "bytes_per_el": 2, "m_tokens": [1, 2], "time_us": [1, 0]}, "time_us"),
        ({"tp": 1, "n_out": 0, "k_in": 8, "bytes_per_el": 2, "m_tokens": [1, 2], "time_us": [1, 2]}, "n_out"),
        ({"tp": 1, "n_out": 8, "k_in": 8, "bytes_per_el": 2, "m_tokens": [1, 2, 4], "time_us": [1, 2]}, "time_us"),
    ],
)
def test_malformed_tables_name_the_field(entry, field):
    with pytest.raises(InputError, match=field):
        gemm_tables({"tables": {"gemm": [entry]}}, "p.yaml")


def _with_attention_ratios():
    from sim.cost.attention_tables import ratio_entry

    base = load_hardware("h100-sxm")
    prefill = ratio_entry("prefill_attention", 32, 32, 128, 2, None, [1e4, 1e6, 1e8], [1.5, 0.8, 1.2])
    decode = ratio_entry("decode_attention", 32, 32, 128, 2, 16, [1e3, 1e5], [2.0, 1.25])
    return base.model_copy(update={"calibration": {"tables": {"attention": [prefill, decode]}}})


def test_attention_ratio_tables_scale_the_smooth_model_in_breakdown_and_hot_path():
    model = load_model("llama-2-7b")  # TP 1: 32 q heads, 32 kv heads, head dim 128
    plain = CostModel(model, load_hardware("h100-sxm"))
    tabled = CostModel(model, _with_attention_ratios())
    q, c = np.array([1000]), np.array([0])  # pairs = 1000 * 500 = 5e5
    get = lambda cost, name, q, c: next(o.time_s for o in cost.breakdown(q, c).ops if o.name == name)  # noqa: E731
    expected = np.exp(np.interp(np.log(5e5), np.log([1e4, 1e6, 1e8]), np.log([1.5, 0.8, 1.2])))
    assert get(tabled, "prefill_attention", q, c) == pytest.approx(expected * get(plain, "prefill_attention", q, c))
    # outside the measured range the edge ratio holds: the smooth model scaled to meet the table
    q1, c1 = np.array([1] * 4), np.array([99_999] * 4)  # 4 x 100,000 KV tokens > 1e5
    assert get(tabled, "decode_attention", q1, c1) == pytest.approx(1.25 * get(plain, "decode_attention", q1, c1))
    mixed_q, mixed_c = np.array([700, 1, 1]), np.array([100, 3000, 50])
    assert tabled.step_time_s(mixed_q, mixed_c, 3) == pytest.approx(tabled.breakdown(mixed_q, mixed_c).time_s,
                                                                    rel=1e-9)  # fmt: skip
    contexts = np.array([100, 2000, 517])
    run = tabled.decode_run_times_s(contexts, 5)
    singles = [tabled.step_time_s(np.ones(3, dtype=np.int64), contexts + s, 3) for s in range(5)]
    assert np.allclose(run, singles, rtol=1e-9)
    other_block = CostModel(model, _with_attention_ratios(), block_size=32)
    assert other_block.decode_ratio is None and other_block.prefill_ratio is not None
