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


# SDPA backends tried in this order on CUDA (the first that accepts the shape is timed); the CPU
# path is the math backend. Names are the measurements' `kernel` column.
CUDA_BACKENDS = ("sdpa_flash", "sdpa_efficient", "sdpa_math")


def _backend(name: str):
    from torch.nn.attention import SDPBackend

    return {"sdpa_flash": SDPBackend.FLASH_ATTENTION, "sdpa_efficient": SDPBackend.EFFICIENT_ATTENTION,
            "sdpa_math": SDPBackend.MATH}[name]


def prefill_with_backend(name: str):
    """`prefill_attention` restricted to one SDPA backend (`torch.nn.attention.sdpa_kernel`)."""
    from torch.nn.attention import sdpa_kernel

    backend = _backend(name)

    def run(inputs: PrefillInputs) -> torch.Tensor:
        with sdpa_kernel(backend):
            return prefill_attention(inputs)

    return run


def pick_backend(inputs: PrefillInputs) -> str:
    """The first of `CUDA_BACKENDS` that runs `inputs` on CUDA (flash where it has the shape);
    "sdpa_math" on CPU."""
    if not inputs.q.is_cuda:
        return "sdpa_math"
    for name in CUDA_BACKENDS:
        try:
            prefill_with_backend(name)(inputs)
            return name
        except RuntimeError:  # "No available kernel": this backend does not take the shape
            continue
    raise RuntimeError("no SDPA backend runs this prefill shape")


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
