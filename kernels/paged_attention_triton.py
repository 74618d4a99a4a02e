"""Paged-attention decode as a split-KV (flash-decoding) Triton kernel.

Layout: see `kernels.paged_attention` (GQA) and `kernels.latent_attention` (MLA, absorbed).

Two launches:
1. `_split_kernel`, one program per (sequence, KV head, KV split). It loads the query heads
   of that KV head's group once ([GROUP_PAD, D]: several query heads per KV head, so each KV
   byte is read once per group, not once per query head), walks its share of the sequence's
   tokens `TILE_TOKENS` at a time (each token's physical block looked up in the block table,
   so every block size works, including ones smaller than a tile), scores them with one
   matrix product per tile and keeps an online softmax. It writes its partial output,
   already normalised, and the log-sum-exp of its scores.
2. `_reduce_kernel`, one program per (sequence, query head): the splits' partials weighted
   by exp(lse_i - max lse).

MLA (absorbed, as FlashMLA and vLLM's Triton MLA decode run it): one shared latent "KV head"
of kv_lora_rank dims plus qk_rope_head_dim RoPE dims per token. The key is the whole row
(main + rope dims), the value is the main (latent) dims of the same row: `v_cache` is
`k_cache` and `ROPE_DIM` > 0 scores the tail.

Splitting a sequence's KV over several programs is what keeps the GPU busy at small batch or
few KV heads (one program per sequence and head leaves most SMs idle); `default_n_splits`
aims at a few programs per SM. On CPU tensors the kernels run in Triton's interpreter (slow:
keep shapes small), which Triton honours only when the process starts with TRITON_INTERPRET=1.
The compile-time parameters are annotated with the bare name `constexpr`: the GPU path reads
the annotation object, while the interpreter re-parses the source and matches the
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
    constexpr = int  # only so the kernels' signatures below still parse

KERNEL_CLASS = "triton_split_kv"
MIN_DOT_ROWS = 16  # tl.dot wants every dimension >= 16: query-head groups are padded up to it
PROGRAMS_PER_SM = 4  # split until (sequences x KV heads x splits) reaches this many per SM
MAX_SPLITS = 64


def triton_available() -> bool:
    """True when Triton imports (GPU compile or CPU interpreter)."""
    return triton is not None


def _split_kernel_source(
    q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, part_out_ptr, part_lse_ptr, scale,
    stride_q_seq, stride_q_head, stride_k_block, stride_k_pos, stride_k_head,
    stride_v_block, stride_v_pos, stride_v_head, stride_table_seq,
    stride_po_seq, stride_po_head, stride_po_split, stride_pl_seq, stride_pl_head,
    GROUP: constexpr, GROUP_PAD: constexpr, BLOCK_SIZE: constexpr, TILE_TOKENS: constexpr,
    HEAD_DIM: constexpr, HEAD_DIM_PAD: constexpr, ROPE_DIM: constexpr, N_SPLITS: constexpr,
    DOT_PRECISION: constexpr,
):
    seq, kv_head, split = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    rows = tl.arange(0, GROUP_PAD)
    row_ok = rows < GROUP
    heads = kv_head * GROUP + rows
    dims = tl.arange(0, HEAD_DIM_PAD)
    dim_ok = dims < HEAD_DIM
    q_rows = q_ptr + seq * stride_q_seq + heads[:, None] * stride_q_head
    q = tl.load(q_rows + dims[None, :], mask=row_ok[:, None] & dim_ok[None, :], other=0.0)
    if ROPE_DIM > 0:
        rope = tl.arange(0, ROPE_DIM)
        q_rope = tl.load(q_rows + HEAD_DIM + rope[None, :], mask=row_ok[:, None], other=0.0)
    context_len = tl.load(lens_ptr + seq)
    split_len = tl.cdiv(tl.cdiv(context_len, N_SPLITS), TILE_TOKENS) * TILE_TOKENS
    start = split * split_len
    end = tl.minimum(start + split_len, context_len)
    running_max = tl.full([GROUP_PAD], -float("inf"), tl.float32)
    running_sum = tl.zeros([GROUP_PAD], tl.float32)
    acc = tl.zeros([GROUP_PAD, HEAD_DIM_PAD], tl.float32)
    for tile_start in range(start, end, TILE_TOKENS):
        positions = tile_start + tl.arange(0, TILE_TOKENS)
        token_ok = positions < end
        physical = tl.load(table_ptr + seq * stride_table_seq + positions // BLOCK_SIZE,
                           mask=token_ok, other=0).to(tl.int64)
        slot = positions % BLOCK_SIZE
        k_rows = k_ptr + physical * stride_k_block + slot * stride_k_pos + kv_head * stride_k_head
        k = tl.load(k_rows[:, None] + dims[None, :], mask=token_ok[:, None] & dim_ok[None, :], other=0.0)
        scores = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION, out_dtype=tl.float32)
        if ROPE_DIM > 0:
            k_rope = tl.load(k_rows[:, None] + HEAD_DIM + rope[None, :], mask=token_ok[:, None], other=0.0)
            scores += tl.dot(q_rope, tl.trans(k_rope), input_precision=DOT_PRECISION, out_dtype=tl.float32)
        scores = tl.where(token_ok[None, :], scores * scale, -float("inf"))
        new_max = tl.maximum(running_max, tl.max(scores, axis=1))
        rescale = tl.exp(running_max - new_max)
        weights = tl.exp(scores - new_max[:, None])
        v_rows = v_ptr + physical * stride_v_block + slot * stride_v_pos + kv_head * stride_v_head
        v = tl.load(v_rows[:, None] + dims[None, :], mask=token_ok[:, None] & dim_ok[None, :], other=0.0)
        acc = acc * rescale[:, None] + tl.dot(weights.to(v.dtype), v, input_precision=DOT_PRECISION,
                                                 out_dtype=tl.float32)
        running_sum = running_sum * rescale + tl.sum(weights, axis=1)
        running_max = new_max
    has_tokens = running_sum > 0
    out = acc / tl.where(has_tokens, running_sum, 1.0)[:, None]
    lse = tl.where(has_tokens, running_max + tl.log(tl.where(has_tokens, running_sum, 1.0)), -float("inf"))
    po = part_out_ptr + seq * stride_po_seq + heads[:, None] * stride_po_head + split * stride_po_split
    tl.store(po + dims[None, :], out, mask=row_ok[:, None] & dim_ok[None, :])
    tl.store(part_lse_ptr + seq * stride_pl_seq + heads * stride_pl_head + split, lse, mask=row_ok)


def _reduce_kernel_source(
    part_out_ptr, part_lse_ptr, out_ptr,
    stride_po_seq, stride_po_head, stride_po_split, stride_pl_seq, stride_pl_head,
    stride_out_seq, stride_out_head,
    HEAD_DIM: constexpr, HEAD_DIM_PAD: constexpr, N_SPLITS: constexpr, N_SPLITS_PAD: constexpr,
):
    seq, head = tl.program_id(0), tl.program_id(1)
    splits = tl.arange(0, N_SPLITS_PAD)
    split_ok = splits < N_SPLITS
    lse = tl.load(part_lse_ptr + seq * stride_pl_seq + head * stride_pl_head + splits,
                  mask=split_ok, other=-float("inf"))
    weights = tl.exp(lse - tl.max(lse, axis=0))  # split 0 always holds a token: max is finite
    dims = tl.arange(0, HEAD_DIM_PAD)
    dim_ok = dims < HEAD_DIM
    po = part_out_ptr + seq * stride_po_seq + head * stride_po_head + splits[:, None] * stride_po_split
    partial = tl.load(po + dims[None, :], mask=split_ok[:, None] & dim_ok[None, :], other=0.0)
    out = tl.sum(partial * weights[:, None], axis=0) / tl.sum(weights, axis=0)
    out_offsets = seq * stride_out_seq + head * stride_out_head + dims
    tl.store(out_ptr + out_offsets, out.to(out_ptr.dtype.element_ty), mask=dim_ok)


_split_kernel = triton.jit(_split_kernel_source) if triton is not None else None
_reduce_kernel = triton.jit(_reduce_kernel_source) if triton is not None else None


def _check_ready(q: torch.Tensor) -> None:
    if triton is None:
        raise RuntimeError("Triton is not installed")
    if not q.is_cuda and not triton.knobs.runtime.interpret:
        raise RuntimeError("CPU tensors need Triton's interpreter: start Python with TRITON_INTERPRET=1")


def default_n_splits(n_seqs: int, n_kv_heads: int, max_context: int, tile_tokens: int, device) -> int:
    """KV splits per sequence: enough programs for `PROGRAMS_PER_SM` per SM (CUDA; 4 programs
    on CPU), at least one tile per split, at most `MAX_SPLITS`."""
    n_sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 1
    wanted = -(-PROGRAMS_PER_SM * n_sms // (n_seqs * n_kv_heads))
    return max(1, min(wanted, -(-max_context // tile_tokens), MAX_SPLITS))


def split_kv_decode(q, k_cache, v_cache, block_table, context_lens, scale: float, head_dim: int,
                    rope_dim: int, n_splits: int | None = None, out: torch.Tensor | None = None,
                    tile_tokens: int | None = None) -> torch.Tensor:
    """Decode attention over a paged cache [n_blocks, block_size, n_kv_heads, width]: keys are
    the first `head_dim + rope_dim` dims of `k_cache` rows, values the first `head_dim` dims of
    `v_cache` rows. Returns (or fills `out`) [batch, n_heads, head_dim] in q's dtype."""
    _check_ready(q)
    n_seqs, n_heads, _ = q.shape
    n_kv_heads, block_size = k_cache.shape[2], k_cache.shape[1]
    if n_heads % n_kv_heads:
        raise ValueError(f"n_heads={n_heads} must be a multiple of n_kv_heads={n_kv_heads}")
    if q.stride(2) != 1 or k_cache.stride(3) != 1 or v_cache.stride(3) != 1 or block_table.stride(1) != 1:
        raise ValueError("q, the caches' last dims and block_table's rows must be contiguous")
    if rope_dim and rope_dim != triton.next_power_of_2(rope_dim):
        raise ValueError(f"rope_dim={rope_dim} must be a power of two")
    group = n_heads // n_kv_heads
    if tile_tokens is None:  # a [tile, head_dim] K tile in registers: fewer tokens for MLA's wide rows
        tile_tokens = 64 if head_dim <= 128 else 16
    tile = max(MIN_DOT_ROWS, tile_tokens)
    if n_splits is None:
        n_splits = default_n_splits(n_seqs, n_kv_heads, int(context_lens.max()), tile, q.device)
    part_out = torch.empty(n_seqs, n_heads, n_splits, head_dim, dtype=torch.float32, device=q.device)
    part_lse = torch.empty(n_seqs, n_heads, n_splits, dtype=torch.float32, device=q.device)
    if out is None:
        out = torch.empty(n_seqs, n_heads, head_dim, dtype=q.dtype, device=q.device)
    head_dim_pad = triton.next_power_of_2(head_dim)
    _split_kernel[(n_seqs, n_kv_heads, n_splits)](
        q, k_cache, v_cache, block_table, context_lens, part_out, part_lse, scale,
        q.stride(0), q.stride(1), *k_cache.stride()[:3], *v_cache.stride()[:3], block_table.stride(0),
        part_out.stride(0), part_out.stride(1), part_out.stride(2), part_lse.stride(0), part_lse.stride(1),
        GROUP=group, GROUP_PAD=max(MIN_DOT_ROWS, triton.next_power_of_2(group)), BLOCK_SIZE=block_size,
        TILE_TOKENS=tile, HEAD_DIM=head_dim, HEAD_DIM_PAD=head_dim_pad, ROPE_DIM=rope_dim, N_SPLITS=n_splits,
        DOT_PRECISION="ieee" if q.dtype == torch.float32 else None,  # fp32 checks: no tf32 rounding
    )  # fmt: skip
    _reduce_kernel[(n_seqs, n_heads)](
        part_out, part_lse, out, part_out.stride(0), part_out.stride(1), part_out.stride(2),
        part_lse.stride(0), part_lse.stride(1), out.stride(0), out.stride(1),
        HEAD_DIM=head_dim, HEAD_DIM_PAD=head_dim_pad, N_SPLITS=n_splits,
        N_SPLITS_PAD=triton.next_power_of_2(n_splits),
    )  # fmt: skip
    return out


def paged_decode_attention_triton(
    batch: PagedBatch, scale: float, out: torch.Tensor | None = None, n_splits: int | None = None
) -> torch.Tensor:
    """GQA paged decode through the split-KV kernel; same contract as the torch reference.

    Writes into `out` (shaped like q) when given, so a check can poison it first.
    CUDA tensors compile for the GPU; CPU tensors run in Triton's interpreter.
    """
    if not (batch.k_cache.is_contiguous() and batch.v_cache.is_contiguous()):
        raise ValueError("k_cache and v_cache must be contiguous")
    if batch.k_cache.shape != batch.v_cache.shape:
        raise ValueError("k_cache and v_cache must have one shape")
    head_dim = batch.q.shape[2]
    return split_kv_decode(batch.q, batch.k_cache, batch.v_cache, batch.block_table, batch.context_lens,
                           scale, head_dim, 0, n_splits, out)  # fmt: skip
