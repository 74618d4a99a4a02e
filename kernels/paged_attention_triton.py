"""Paged-attention decode as a Triton kernel (layout: see `kernels.paged_attention`).

One program per (sequence, query head). It walks the sequence's blocks through the block
table, scores one block of keys at a time and keeps a running max, running sum and
weighted-V accumulator (online softmax), so memory traffic is one pass over the
sequence's K and V. Query heads of one GQA group re-read the same KV head, which the
GPU's L2 mostly absorbs.

On CPU tensors the kernel runs in Triton's interpreter (slow: keep shapes small), which
Triton only honours when the process starts with TRITON_INTERPRET=1 (Triton decides at
import which of its own helpers to interpret), so `python -m kernels.selfcheck` is run
in a fresh process for that.
The compile-time parameters are annotated with the bare name `constexpr`: the GPU path
reads the annotation object, while the interpreter re-parses the source and matches the
annotation's text against "constexpr" (Triton 3.9).
"""

import torch

from kernels.paged_attention import PagedBatch

try:
    import triton
    import triton.language as tl
    from triton.language import constexpr
except ImportError:  # Triton is optional; `triton_available()` says so.
    triton = None
    constexpr = int  # only so the kernel's signature below still parses


def triton_available() -> bool:
    """True when Triton imports (GPU compile or CPU interpreter)."""
    return triton is not None


def _paged_decode_kernel_source(
    q_ptr,
    k_cache_ptr,
    v_cache_ptr,
    block_table_ptr,
    context_lens_ptr,
    out_ptr,
    scale,
    stride_q_seq,
    stride_q_head,
    stride_cache_block,
    stride_cache_pos,
    stride_cache_head,
    stride_table_seq,
    stride_out_seq,
    stride_out_head,
    GROUP_SIZE: constexpr,
    BLOCK_SIZE: constexpr,
    HEAD_DIM: constexpr,
    HEAD_DIM_PAD: constexpr,
):
    seq = tl.program_id(0)
    head = tl.program_id(1)
    kv_head = head // GROUP_SIZE
    dims = tl.arange(0, HEAD_DIM_PAD)
    dim_ok = dims < HEAD_DIM
    q_offsets = seq * stride_q_seq + head * stride_q_head + dims
    q = tl.load(q_ptr + q_offsets, mask=dim_ok, other=0.0).to(tl.float32) * scale
    context_len = tl.load(context_lens_ptr + seq)
    positions = tl.arange(0, BLOCK_SIZE)
    running_max = -float("inf")
    running_sum = 0.0
    acc = tl.zeros([HEAD_DIM_PAD], dtype=tl.float32)
    for block_index in range(tl.cdiv(context_len, BLOCK_SIZE)):
        physical = tl.load(block_table_ptr + seq * stride_table_seq + block_index).to(tl.int64)
        token_ok = block_index * BLOCK_SIZE + positions < context_len
        offsets = (
            physical * stride_cache_block
            + positions[:, None] * stride_cache_pos
            + kv_head * stride_cache_head
            + dims[None, :]
        )
        tile_ok = token_ok[:, None] & dim_ok[None, :]
        k = tl.load(k_cache_ptr + offsets, mask=tile_ok, other=0.0).to(tl.float32)
        scores = tl.sum(k * q[None, :], axis=1)
        scores = tl.where(token_ok, scores, -float("inf"))
        new_max = tl.maximum(running_max, tl.max(scores, axis=0))
        rescale = tl.exp(running_max - new_max)
        weights = tl.exp(scores - new_max)
        v = tl.load(v_cache_ptr + offsets, mask=tile_ok, other=0.0).to(tl.float32)
        acc = acc * rescale + tl.sum(weights[:, None] * v, axis=0)
        running_sum = running_sum * rescale + tl.sum(weights, axis=0)
        running_max = new_max
    out = acc / running_sum
    out_offsets = seq * stride_out_seq + head * stride_out_head + dims
    tl.store(out_ptr + out_offsets, out.to(out_ptr.dtype.element_ty), mask=dim_ok)


_paged_decode_kernel = triton.jit(_paged_decode_kernel_source) if triton is not None else None


def _check_layout(batch: PagedBatch) -> None:
    if not (batch.k_cache.is_contiguous() and batch.v_cache.is_contiguous()):
        raise ValueError("k_cache and v_cache must be contiguous")
    if batch.k_cache.shape != batch.v_cache.shape:
        raise ValueError("k_cache and v_cache must have one shape")
    if batch.q.stride(2) != 1 or batch.block_table.stride(1) != 1:
        raise ValueError("q's last dim and block_table's rows must be contiguous")


def paged_decode_attention_triton(
    batch: PagedBatch, scale: float, out: torch.Tensor | None = None
) -> torch.Tensor:
    """Paged decode through the Triton kernel; same contract as the torch reference.

    Writes into `out` (shaped like q) when given, so a check can poison it first.
    CUDA tensors compile for the GPU; CPU tensors run in Triton's interpreter.
    """
    if triton is None:
        raise RuntimeError("Triton is not installed")
    if not batch.q.is_cuda and not triton.knobs.runtime.interpret:
        raise RuntimeError(
            "CPU tensors need Triton's interpreter: start Python with TRITON_INTERPRET=1"
        )
    _check_layout(batch)
    n_seqs, n_heads, head_dim = batch.q.shape
    n_kv_heads = batch.k_cache.shape[2]
    if n_heads % n_kv_heads:
        raise ValueError(f"n_heads={n_heads} must be a multiple of n_kv_heads={n_kv_heads}")
    if out is None:
        out = torch.empty_like(batch.q)
    _paged_decode_kernel[(n_seqs, n_heads)](
        batch.q,
        batch.k_cache,
        batch.v_cache,
        batch.block_table,
        batch.context_lens,
        out,
        scale,
        batch.q.stride(0),
        batch.q.stride(1),
        batch.k_cache.stride(0),
        batch.k_cache.stride(1),
        batch.k_cache.stride(2),
        batch.block_table.stride(0),
        out.stride(0),
        out.stride(1),
        GROUP_SIZE=n_heads // n_kv_heads,
        BLOCK_SIZE=batch.block_size,
        HEAD_DIM=head_dim,
        HEAD_DIM_PAD=triton.next_power_of_2(head_dim),
    )
    return out
