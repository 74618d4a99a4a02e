"""Sliding-window / chunked-local attention cost is bounded by the window (sim/cost/window.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cost import CostModel
from sim.cost.window import Window, kv_within, pairs_within, window_sums, window_sums_scalar
from sim.inputs.hardware import load_hardware
from sim.inputs.model import load_model


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 300), st.integers(0, 600), st.integers(1, 400))
def test_pairs_within_the_window_equal_brute_force(q, c, w):
    brute = sum(min(c + i, w) for i in range(1, q + 1)) - 0.5 * q
    assert pairs_within(np.array([q]), np.array([c]), w)[0] == brute


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1, 1, 2, 50, 700]), st.integers(0, 3000)), min_size=1, max_size=30))
def test_scalar_and_array_window_sums_agree(seqs):
    window = Window(128, 144, 16)
    q, c = (list(x) for x in zip(*seqs))
    assert window_sums(np.array(q), np.array(c), window) == window_sums_scalar(q, c, window)


def test_windowed_layers_read_only_their_window():
    cost = CostModel(load_model("gpt-oss-120b"), load_hardware("h100-sxm"), 1, weight_dtype="auto")
    short, long = (cost.breakdown([1] * 8, [c] * 8) for c in (2_000, 100_000))
    def op(step, name):
        return next(o for o in step.ops if o.name == name)
    windowed = "decode_attention (windowed layers)"
    assert op(short, windowed).bytes == op(long, windowed).bytes  # 9 blocks of 16 per sequence either way
    assert op(short, windowed).bytes == pytest.approx(0.5 * 8 * 144 * cost.kv_bytes_per_token_layer_gpu
                                                      + 0.5 * 2 * 8 * 64 * 64 * 2)
    assert op(long, "decode_attention").bytes > 40 * op(short, "decode_attention").bytes / 2
    assert kv_within(np.array([1]), np.array([10]), Window(128, 144, 16))[0] == 16  # short: what it holds


def test_hybrid_decode_is_cheaper_than_all_layers_full_at_long_context():
    model = load_model("gpt-oss-120b")
    hybrid = CostModel(model, load_hardware("h100-sxm"), 1, weight_dtype="auto")
    full = CostModel(model.model_copy(update={"layer_attention": None, "window_tokens": None}),
                     load_hardware("h100-sxm"), 1, weight_dtype="auto")
    new, cached = np.ones(64, dtype=np.int64), np.full(64, 100_000)
    attention = [sum(o.time_s for o in c.breakdown(new, cached).ops if "attention" in o.name) for c in (hybrid, full)]
    assert attention[0] == pytest.approx(attention[1] / 2, rel=0.02)
