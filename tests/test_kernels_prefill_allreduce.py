"""Prefill attention (SDPA) against a dense causal oracle; all-reduce timing over gloo."""

import pytest

torch = pytest.importorskip("torch")

from kernels.allreduce import measure_allreduce, unavailable_reason
from kernels.prefill_attention import (
    causal_attention_dense,
    make_prefill_inputs,
    prefill_attention,
)


@pytest.mark.parametrize("n_heads,n_kv_heads", [(4, 4), (8, 2), (6, 1)])
def test_prefill_matches_dense_causal(n_heads, n_kv_heads):
    torch.manual_seed(0)
    inputs = make_prefill_inputs(2, 37, n_heads, n_kv_heads, 32, torch.float32, "cpu")
    out, dense = prefill_attention(inputs), causal_attention_dense(inputs)
    assert out.shape == (2, n_heads, 37, 32)
    assert float((out - dense).norm() / dense.norm()) < 1e-5


def test_prefill_is_causal():
    """Changing the last token's K/V must not change any earlier query's output."""
    torch.manual_seed(1)
    inputs = make_prefill_inputs(1, 16, 4, 2, 16, torch.float32, "cpu")
    k, v = inputs.k.clone(), inputs.v.clone()
    k[:, :, -1], v[:, :, -1] = 10.0, -10.0
    changed = type(inputs)(inputs.q, k, v)
    before, after = prefill_attention(inputs), prefill_attention(changed)
    assert torch.equal(before[:, :, :-1], after[:, :, :-1])
    assert not torch.allclose(before[:, :, -1], after[:, :, -1])


def test_allreduce_unavailable_off_gpu():
    assert "not cuda" in unavailable_reason("cpu")


def test_allreduce_times_each_payload_over_gloo():
    timings = measure_allreduce([256, 65536], 2, torch.float32, "gloo", n_warmup=1, n_repeats=3)
    assert [t.payload_bytes for t in timings] == [256, 65536]
    assert all(t.world_size == 2 and t.n_repeats == 3 and t.time_s > 0 for t in timings)


def test_allreduce_needs_two_ranks():
    with pytest.raises(ValueError):
        measure_allreduce([256], 1, torch.float32, "gloo")
