"""Paged-attention decode against dense attention: torch reference, Triton kernel."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from hypothesis import given, settings
from hypothesis import strategies as st

from kernels import paged_attention as pa
from kernels import paged_attention_triton as pat
from kernels.selfcheck import BLOCK_SIZES, check, relative_error

REPO = Path(__file__).resolve().parents[1]


def _case(context_lens, n_heads, n_kv_heads, head_dim, block_size, seed):
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(len(context_lens), n_heads, head_dim, generator=generator)
    k_seqs = [torch.randn(n, n_kv_heads, head_dim, generator=generator) for n in context_lens]
    v_seqs = [torch.randn(n, n_kv_heads, head_dim, generator=generator) for n in context_lens]
    dense = pa.dense_decode_attention(q, k_seqs, v_seqs, head_dim**-0.5)
    batch = pa.paged_batch_from_dense(q, k_seqs, v_seqs, block_size, generator)
    return batch, dense


@pytest.mark.parametrize("block_size", BLOCK_SIZES)
def test_torch_reference_matches_dense_every_block_size(block_size):
    # ragged contexts: 1 token, a partial last block, exact multiples, many blocks
    lens = [1, block_size - 1, block_size, 2 * block_size + 3, 300]
    lens = [n for n in lens if n >= 1]
    batch, dense = _case(lens, n_heads=8, n_kv_heads=2, head_dim=64, block_size=block_size, seed=1)
    out = pa.paged_decode_attention_torch(batch, 64**-0.5)
    assert relative_error(out, dense) < 1e-5


@settings(max_examples=25, deadline=None)
@given(
    context_lens=st.lists(st.integers(1, 200), min_size=1, max_size=5),
    n_kv_heads=st.sampled_from([1, 2, 4]),
    group=st.sampled_from([1, 2, 4]),
    head_dim=st.sampled_from([16, 48, 64]),
    block_size=st.sampled_from(BLOCK_SIZES),
    seed=st.integers(0, 2**31 - 1),
)
def test_torch_reference_matches_dense_any_batch(
    context_lens, n_kv_heads, group, head_dim, block_size, seed
):
    batch, dense = _case(context_lens, n_kv_heads * group, n_kv_heads, head_dim, block_size, seed)
    out = pa.paged_decode_attention_torch(batch, head_dim**-0.5)
    assert relative_error(out, dense) < 1e-5


def test_comparison_catches_a_wrong_context_length():
    """Negative control: reading one cached token too many must fail the tolerance."""
    batch, dense = _case([20, 33], n_heads=4, n_kv_heads=2, head_dim=32, block_size=16, seed=3)
    longer = pa.PagedBatch(
        batch.q, batch.k_cache, batch.v_cache, batch.block_table, batch.context_lens + 1
    )
    assert relative_error(pa.paged_decode_attention_torch(longer, 32**-0.5), dense) > 1e-3


def test_random_paged_batch_uses_each_block_once():
    batch = pa.random_paged_batch([5, 40, 17], 16, 4, 2, 32, torch.float32, "cpu")
    used = [
        int(batch.block_table[j, b])
        for j, n in enumerate([5, 40, 17])
        for b in range(pa.n_blocks_for(n, 16))
    ]
    assert sorted(used) == list(range(batch.k_cache.shape[0])) == list(range(1 + 3 + 2))


def test_heads_must_group_evenly():
    with pytest.raises(ValueError):
        pa.random_paged_batch([4], 8, n_heads=6, n_kv_heads=4, head_dim=16,
                              dtype=torch.float32, device="cpu")  # fmt: skip


@pytest.mark.skipif(not pat.triton_available(), reason="Triton is not installed")
def test_triton_kernel_in_interpreter_matches_dense():
    """Triton's interpreter honours TRITON_INTERPRET only from process start: run the
    selfcheck in a fresh interpreter process."""
    env = dict(os.environ, TRITON_INTERPRET="1")
    completed = subprocess.run(
        [sys.executable, "-m", "kernels.selfcheck", "--device", "cpu"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    result = json.loads(completed.stdout)
    assert result["skipped"] == {}
    assert set(result["errors"]["triton"]) == {str(b) for b in BLOCK_SIZES}
    assert max(result["errors"]["triton"].values()) < 1e-5
    assert completed.returncode == 0


def test_triton_on_cpu_without_interpreter_says_why():
    if not pat.triton_available() or pat.triton.knobs.runtime.interpret:
        pytest.skip("needs Triton, without TRITON_INTERPRET")
    batch, _ = _case([3], 2, 1, 16, 8, seed=0)
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET"):
        pat.paged_decode_attention_triton(batch, 0.25)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype_name", ["fp32", "bf16"])
def test_triton_and_reference_on_gpu_match_dense(dtype_name):
    result = check(device="cuda", dtype_name=dtype_name)
    assert "triton" in result["errors"], result["skipped"]
    for per_block in result["errors"].values():
        assert max(per_block.values()) < result["tolerance"]
