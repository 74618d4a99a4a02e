"""Paged-attention decode: one new query token per sequence against its cached K/V.

Layout (vLLM-like, one layer, one shard):
- `k_cache`, `v_cache`: [n_blocks, block_size, n_kv_heads, head_dim]
- `block_table`: [batch, max_blocks] int32; row j lists sequence j's physical blocks in
  order. Entries past `ceil(context_lens[j] / block_size)` are ignored, whatever they hold.
- `context_lens`: [batch] int32, each >= 1 (the decoding token's own K/V is cached).
- `q`: [batch, n_heads, head_dim]; query head h reads KV head h // (n_heads / n_kv_heads).

Three implementations of one function: `dense_decode_attention` (the oracle, one sequence
at a time over contiguous K/V), `paged_decode_attention_torch` (gathers blocks through the
table; the CPU timing path) and the Triton kernel in `paged_attention_triton`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PagedBatch:
    """One decode step's inputs for a batch of sequences."""

    q: torch.Tensor
    k_cache: torch.Tensor
    v_cache: torch.Tensor
    block_table: torch.Tensor
    context_lens: torch.Tensor

    @property
    def block_size(self) -> int:
        return self.k_cache.shape[1]

    @property
    def n_bytes(self) -> int:
        tensors = (self.q, self.k_cache, self.v_cache, self.block_table, self.context_lens)
        return sum(t.numel() * t.element_size() for t in tensors)

    def kv_bytes_read(self) -> int:
        """Bytes of K and V the step must read: each context token's K and V rows once."""
        n_kv_heads, head_dim = self.k_cache.shape[2:]
        return int(self.context_lens.sum()) * 2 * n_kv_heads * head_dim * self.k_cache.element_size()


def n_blocks_for(context_len: int, block_size: int) -> int:
    """Blocks one sequence of `context_len` tokens occupies (the last may be partial)."""
    return -(-context_len // block_size)


def _check_heads(n_heads: int, n_kv_heads: int) -> int:
    if n_kv_heads < 1 or n_heads % n_kv_heads:
        raise ValueError(f"n_heads={n_heads} must be a multiple of n_kv_heads={n_kv_heads}")
    return n_heads // n_kv_heads


def dense_decode_attention(
    q: torch.Tensor, k_seqs: list[torch.Tensor], v_seqs: list[torch.Tensor], scale: float
) -> torch.Tensor:
    """Oracle: softmax(q·Kᵀ·scale)·V per sequence, K/V given contiguous [ctx, n_kv, d].

    Returns [batch, n_heads, head_dim] in float64 (computed in float64 from the inputs as
    given, never rounded back, so it can judge low-precision kernels too).
    """
    n_heads = q.shape[1]
    outputs = []
    for j, (k, v) in enumerate(zip(k_seqs, v_seqs)):
        group = _check_heads(n_heads, k.shape[1])
        k_per_head = k.double().repeat_interleave(group, dim=1)  # [ctx, n_heads, d]
        v_per_head = v.double().repeat_interleave(group, dim=1)
        scores = torch.einsum("hd,thd->ht", q[j].double(), k_per_head) * scale
        weights = torch.softmax(scores, dim=-1)
        outputs.append(torch.einsum("ht,thd->hd", weights, v_per_head))
    return torch.stack(outputs)


def paged_decode_attention_torch(batch: PagedBatch, scale: float) -> torch.Tensor:
    """Reference paged decode: gather each sequence's blocks through the block table,
    mask positions past its context, softmax, weight V. Vectorised over the batch.

    Returns [batch, n_heads, head_dim] in q's dtype; accumulates in float32 (or better).
    """
    q, block_table, context_lens = batch.q, batch.block_table, batch.context_lens
    n_seqs, n_heads, head_dim = q.shape
    n_kv_heads, block_size = batch.k_cache.shape[2], batch.block_size
    group = _check_heads(n_heads, n_kv_heads)
    max_blocks = n_blocks_for(int(context_lens.max()), block_size)
    table = block_table[:, :max_blocks].long()
    block_ids = torch.arange(max_blocks, device=q.device)
    used = block_ids[None, :] < (context_lens[:, None] + block_size - 1) // block_size
    table = torch.where(used, table, torch.zeros_like(table))  # ignored entries -> any block
    compute_dtype = torch.promote_types(q.dtype, torch.float32)
    n_positions = max_blocks * block_size
    k = batch.k_cache[table].reshape(n_seqs, n_positions, n_kv_heads, head_dim)
    v = batch.v_cache[table].reshape(n_seqs, n_positions, n_kv_heads, head_dim)
    q_grouped = q.reshape(n_seqs, n_kv_heads, group, head_dim).to(compute_dtype)
    scores = torch.einsum("bkgd,btkd->bkgt", q_grouped, k.to(compute_dtype)) * scale
    positions = torch.arange(n_positions, device=q.device)
    valid = positions[None, :] < context_lens[:, None]
    scores = scores.masked_fill(~valid[:, None, None, :], -math.inf)
    weights = torch.softmax(scores, dim=-1)
    out = torch.einsum("bkgt,btkd->bkgd", weights, v.to(compute_dtype))
    return out.reshape(n_seqs, n_heads, head_dim).to(q.dtype)


def paged_batch_from_dense(
    q: torch.Tensor,
    k_seqs: list[torch.Tensor],
    v_seqs: list[torch.Tensor],
    block_size: int,
    generator: torch.Generator,
    n_spare_blocks: int = 3,
) -> PagedBatch:
    """Scatter contiguous per-sequence K/V into a shuffled paged cache, block by block.

    Physical blocks are a random permutation (plus `n_spare_blocks` unused, filled with
    noise) so a kernel that ignores the table or reads past a context is caught. Unused
    table entries point at random blocks for the same reason.
    """
    n_kv_heads, head_dim = k_seqs[0].shape[1:]
    lens = [k.shape[0] for k in k_seqs]
    blocks_per_seq = [n_blocks_for(n, block_size) for n in lens]
    n_blocks = sum(blocks_per_seq) + n_spare_blocks
    shape = (n_blocks, block_size, n_kv_heads, head_dim)
    k_cache = torch.randn(shape, generator=generator).to(q.dtype) * 100
    v_cache = torch.randn(shape, generator=generator).to(q.dtype) * 100
    order = torch.randperm(n_blocks, generator=generator)
    max_blocks = max(blocks_per_seq) + 1
    table = torch.randint(0, n_blocks, (len(lens), max_blocks), generator=generator)
    next_block = 0
    for j, (k, v) in enumerate(zip(k_seqs, v_seqs)):
        for b in range(blocks_per_seq[j]):
            physical = int(order[next_block])
            next_block += 1
            table[j, b] = physical
            rows = slice(b * block_size, min((b + 1) * block_size, lens[j]))
            n_rows = rows.stop - rows.start
            k_cache[physical, :n_rows] = k[rows]
            v_cache[physical, :n_rows] = v[rows]
    context_lens = torch.tensor(lens, dtype=torch.int32)
    return PagedBatch(q, k_cache, v_cache, table.to(torch.int32), context_lens)


def random_paged_batch(
    context_lens: list[int],
    block_size: int,
    n_heads: int,
    n_kv_heads: int,
    head_dim: int,
    dtype: torch.dtype,
    device: str,
) -> PagedBatch:
    """A timing batch made on `device`: random q and cache, blocks assigned in a shuffled
    order (as after a while of serving), exactly as many blocks as the contexts need."""
    _check_heads(n_heads, n_kv_heads)
    if min(context_lens) < 1:
        raise ValueError("every context length must be >= 1")
    blocks_per_seq = [n_blocks_for(n, block_size) for n in context_lens]
    n_blocks, max_blocks = sum(blocks_per_seq), max(blocks_per_seq)
    shape = (n_blocks, block_size, n_kv_heads, head_dim)
    k_cache = torch.randn(shape, dtype=dtype, device=device)
    v_cache = torch.randn(shape, dtype=dtype, device=device)
    q = torch.randn(len(context_lens), n_heads, head_dim, dtype=dtype, device=device)
    order = torch.randperm(n_blocks)
    table = torch.zeros(len(context_lens), max_blocks, dtype=torch.int32)
    start = 0
    for j, n in enumerate(blocks_per_seq):
        table[j, :n] = order[start : start + n].to(torch.int32)
        start += n
    lens = torch.tensor(context_lens, dtype=torch.int32)
    return PagedBatch(q, k_cache, v_cache, table.to(device), lens.to(device))
