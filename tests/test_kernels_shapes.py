"""Projection GEMM shapes per tensor-parallel shard."""

from types import SimpleNamespace

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from kernels.shapes import (
    GEMM_OPS,
    ModelDims,
    attention_heads,
    dims_from_spec,
    projection_shapes,
    shapes_for,
)
from sim.errors import InputError

LLAMA3_8B = {
    "hidden": 4096, "n_heads": 32, "n_kv_heads": 8, "head_dim": 128,
    "intermediate": 14336, "vocab": 128256,
}  # fmt: skip


def _by_op(shapes):
    return {shape.op: (shape.n_out, shape.k_in) for shape in shapes}


def test_llama3_8b_tp1():
    shapes = _by_op(projection_shapes(**LLAMA3_8B, tp=1))
    assert shapes == {
        "qkv_proj": ((32 + 2 * 8) * 128, 4096),
        "o_proj": (4096, 4096),
        "gate_up_proj": (2 * 14336, 4096),
        "down_proj": (4096, 14336),
        "lm_head": (128256, 4096),
    }


def test_llama3_8b_tp2():
    shapes = _by_op(projection_shapes(**LLAMA3_8B, tp=2))
    assert shapes == {
        "qkv_proj": ((32 + 2 * 8) * 128 // 2, 4096),
        "o_proj": (4096, 2048),
        "gate_up_proj": (14336, 4096),
        "down_proj": (4096, 7168),
        "lm_head": (64128, 4096),
    }


def test_order_matches_gemm_ops():
    assert tuple(s.op for s in projection_shapes(**LLAMA3_8B)) == GEMM_OPS


def test_kv_heads_replicate_past_their_count():
    # TP 16 > 8 KV heads: each shard keeps one KV head, 2 query heads.
    heads = attention_heads(ModelDims(**LLAMA3_8B), tp=16)
    assert (heads.n_heads, heads.n_kv_heads) == (2, 1)
    shapes = _by_op(projection_shapes(**LLAMA3_8B, tp=16))
    assert shapes["qkv_proj"] == ((2 + 2 * 1) * 128, 4096)


def test_plain_mlp_has_one_up_matrix():
    dims = dict(LLAMA3_8B, intermediate=16384)
    assert _by_op(projection_shapes(**dims, tp=4, gated=False))["gate_up_proj"] == (4096, 4096)


@pytest.mark.parametrize("tp", [0, 3, 64])
def test_tp_that_does_not_split_raises(tp):
    with pytest.raises(InputError) as error:
        projection_shapes(**LLAMA3_8B, tp=tp)
    assert error.value.where == "tp"


def test_dims_from_spec_reads_model_spec_names():
    spec = SimpleNamespace(
        hidden_size=4096, n_heads=32, n_kv_heads=32, head_dim=128,
        intermediate_size=11008, vocab_size=32000, mlp="gated",
    )  # fmt: skip
    dims = dims_from_spec(spec)
    assert dims == ModelDims(4096, 32, 32, 128, 11008, 32000, True)
    assert _by_op(shapes_for(dims, 2))["qkv_proj"] == (3 * 32 * 128 // 2, 4096)


def test_dims_from_bundled_llama3_8b():
    from sim.inputs.model import load_model

    dims = dims_from_spec(load_model("llama-3-8b"))
    assert _by_op(shapes_for(dims, 1)) == _by_op(projection_shapes(**LLAMA3_8B))


@given(
    n_kv_heads=st.sampled_from([1, 2, 4, 8]),
    group=st.sampled_from([1, 2, 4, 8]),
    head_dim=st.sampled_from([64, 128]),
    hidden_mult=st.integers(1, 8),
    intermediate_mult=st.integers(1, 64),
    tp=st.sampled_from([1, 2, 4, 8]),
)
def test_shards_add_up_to_the_whole_model(
    n_kv_heads, group, head_dim, hidden_mult, intermediate_mult, tp
):
    n_heads = n_kv_heads * group
    assume(n_heads % tp == 0 and (n_kv_heads % tp == 0 or tp % n_kv_heads == 0))
    dims = ModelDims(
        hidden=512 * hidden_mult, n_heads=n_heads, n_kv_heads=n_kv_heads, head_dim=head_dim,
        intermediate=256 * intermediate_mult * tp, vocab=32000, gated=True,
    )  # fmt: skip
    whole, shard = _by_op(shapes_for(dims, 1)), _by_op(shapes_for(dims, tp))
    for op in ("o_proj", "gate_up_proj", "down_proj"):
        assert shard[op][0] * shard[op][1] * tp == whole[op][0] * whole[op][1]
    q_part = n_heads * head_dim // tp
    kv_part = max(1, n_kv_heads // tp) * head_dim
    assert shard["qkv_proj"] == (q_part + 2 * kv_part, dims.hidden)
    assert shard["lm_head"][0] * tp >= 32000 > (shard["lm_head"][0] - 1) * tp
