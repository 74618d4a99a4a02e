"""Prefill attention: causal self-attention over a batch of equal-length prompts,
through torch's scaled_dot_product_attention (flash / memory-efficient kernels on GPU).

Layout: q [batch, n_heads, seq, head_dim], k and v [batch, n_kv_heads, seq, head_dim];
query head h reads KV head h // (n_heads / n_kv_heads).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PrefillInputs:
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor

    @property
    def n_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.q, self.k, self.v))


def make_prefill_inputs(
    batch_size: int,
    seq_len: int,
    n_heads: int,
    n_kv_heads: int,
    head_dim: int,
    dtype: torch.dtype,
    device: str,
) -> PrefillInputs:
    """Random q, k, v made on `device`."""
    if n_kv_heads < 1 or n_heads % n_kv_heads:
        raise ValueError(f"n_heads={n_heads} must be a multiple of n_kv_heads={n_kv_heads}")

    def rand(n: int) -> torch.Tensor:
        return torch.randn(batch_size, n, seq_len, head_dim, dtype=dtype, device=device)

    return PrefillInputs(rand(n_heads), rand(n_kv_heads), rand(n_kv_heads))


def prefill_attention(inputs: PrefillInputs) -> torch.Tensor:
    """Causal attention, [batch, n_heads, seq, head_dim]; GQA handled inside SDPA."""
    grouped = inputs.q.shape[1] != inputs.k.shape[1]
    return torch.nn.functional.scaled_dot_product_attention(
        inputs.q, inputs.k, inputs.v, is_causal=True, enable_gqa=grouped
    )


def causal_attention_dense(inputs: PrefillInputs) -> torch.Tensor:
    """Oracle: explicit masked softmax in float64, KV heads repeated per group; returns
    float64."""
    group = inputs.q.shape[1] // inputs.k.shape[1]
    q = inputs.q.double()
    k = inputs.k.double().repeat_interleave(group, dim=1)
    v = inputs.v.double().repeat_interleave(group, dim=1)
    seq_len = q.shape[2]
    scores = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
    future = torch.ones(seq_len, seq_len, dtype=torch.bool, device=q.device).triu(1)
    weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    return weights @ v
