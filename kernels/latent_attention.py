"""MLA decode attention, absorbed form: every query head against one shared latent cache.

DeepSeek-V2/V3/R1 cache, per token and layer, a kv_lora_rank latent c and one RoPE key of
qk_rope_head_dim dims, as one row [c | k_rope] (what vLLM's MLA backends and FlashMLA store:
kv_lora_rank + qk_rope_head_dim = 576 values for DeepSeek-V3). Decode absorbs W_UK into the
query (q_nope @ W_UK: a kv_lora_rank-wide query per head) and W_UV into the output, so the
attention itself scores [q_latent | q_rope] against the whole row and weighs the latent c:

- `kv_cache`: [n_blocks, block_size, 1, kv_lora_rank + rope_dim]
- `q`: [batch, n_heads, kv_lora_rank + rope_dim]; output [batch, n_heads, kv_lora_rank]
- `block_table`, `context_lens`: as in `kernels.paged_attention`.

The softmax scale is the model's: 1 / sqrt(qk_nope_head_dim + qk_rope_head_dim), not the
latent width. `dense_latent_attention` is the oracle, `latent_decode_attention_torch` the
CPU timing path and `latent_decode_attention_triton` the split-KV kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kernels import paged_attention as pa
from kernels.paged_attention_triton import split_kv_decode


@dataclass(frozen=True)
class LatentPagedBatch:
    """One MLA decode step's inputs; the latent is `kv_cache[..., :latent_dim]`."""

    q: torch.Tensor
    kv_cache: torch.Tensor
    block_table: torch.Tensor
    context_lens: torch.Tensor
    latent_dim: int

    @property
    def rope_dim(self) -> int:
        return self.kv_cache.shape[3] - self.latent_dim

    @property
    def n_bytes(self) -> int:
        tensors = (self.q, self.kv_cache, self.block_table, self.context_lens)
        return sum(t.numel() * t.element_size() for t in tensors)

    def kv_bytes_read(self) -> int:
        """Bytes of cached rows the step must read: each context token's row once."""
        row_bytes = self.kv_cache.shape[3] * self.kv_cache.element_size()
        return int(self.context_lens.sum()) * row_bytes


def dense_latent_attention(q: torch.Tensor, rows: list[torch.Tensor], latent_dim: int, scale: float):
    """Oracle in float64: softmax(q · rowᵀ · scale) · row[:, :latent_dim] per sequence, the rows
    given contiguous [ctx, latent_dim + rope_dim]. Returns [batch, n_heads, latent_dim]."""
    outputs = []
    for j, row in enumerate(rows):
        scores = q[j].double() @ row.double().T * scale
        outputs.append(torch.softmax(scores, dim=-1) @ row.double()[:, :latent_dim])
    return torch.stack(outputs)


def latent_decode_attention_torch(batch: LatentPagedBatch, scale: float) -> torch.Tensor:
    """The GQA torch reference with one KV head whose value is the latent part of the key."""
    v_cache = batch.kv_cache[..., : batch.latent_dim]
    q = batch.q
    padded_v = torch.nn.functional.pad(v_cache, (0, batch.rope_dim))  # one width for the reference
    gqa = pa.PagedBatch(q, batch.kv_cache, padded_v, batch.block_table, batch.context_lens)
    return pa.paged_decode_attention_torch(gqa, scale)[..., : batch.latent_dim]


def latent_decode_attention_triton(batch: LatentPagedBatch, scale: float, out: torch.Tensor | None = None,
                                   n_splits: int | None = None) -> torch.Tensor:
    """MLA decode through the split-KV Triton kernel (`kernels.paged_attention_triton`)."""
    return split_kv_decode(batch.q, batch.kv_cache, batch.kv_cache, batch.block_table, batch.context_lens,
                           scale, batch.latent_dim, batch.rope_dim, n_splits, out)  # fmt: skip


def latent_batch_from_dense(q: torch.Tensor, rows: list[torch.Tensor], latent_dim: int, block_size: int,
                            generator: torch.Generator) -> LatentPagedBatch:
    """Scatter per-sequence rows into a shuffled paged cache (noise in unused slots and blocks)."""
    k_seqs = [row[:, None, :] for row in rows]
    paged = pa.paged_batch_from_dense(q, k_seqs, k_seqs, block_size, generator)
    return LatentPagedBatch(q, paged.k_cache, paged.block_table, paged.context_lens, latent_dim)


def random_latent_batch(context_lens: list[int], block_size: int, n_heads: int, latent_dim: int, rope_dim: int,
                        dtype: torch.dtype, device: str) -> LatentPagedBatch:
    """A timing batch on `device`: random q and latent cache, blocks in shuffled order."""
    paged = pa.random_paged_batch(context_lens, block_size, n_heads, 1, latent_dim + rope_dim, dtype, device)
    return LatentPagedBatch(paged.q, paged.k_cache, paged.block_table, paged.context_lens, latent_dim)
