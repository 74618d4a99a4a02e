"""Projection GEMM/GEMV: activations [M, k_in] times a weight stored [n_out, k_in].

The weight layout is torch's `nn.Linear` (output rows), which is what serving engines
call, so `torch.nn.functional.linear` reaches the same cuBLAS paths they do.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class GemmInputs:
    """One set of operands for a projection: `x` [M, k_in], `weight` [n_out, k_in]."""

    x: torch.Tensor
    weight: torch.Tensor

    @property
    def n_bytes(self) -> int:
        return _tensor_bytes(self.x) + _tensor_bytes(self.weight)


def _tensor_bytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def gemm_bytes(m_tokens: int, n_out: int, k_in: int, dtype: torch.dtype) -> int:
    """Bytes of one operand set (activations + weight), before allocating it."""
    element_bytes = torch.empty((), dtype=dtype).element_size()
    return (m_tokens * k_in + n_out * k_in) * element_bytes


def make_gemm_inputs(
    m_tokens: int,
    n_out: int,
    k_in: int,
    dtype: torch.dtype,
    device: str,
    generator: torch.Generator | None = None,
) -> GemmInputs:
    """Random operands made on `device` (never zeros: zeros can run faster than real
    data), the weight scaled by 1/sqrt(k_in) so products stay O(1) in low precision.
    `generator`, when given, must live on `device`."""
    x = torch.randn(m_tokens, k_in, generator=generator, dtype=dtype, device=device)
    weight = torch.randn(n_out, k_in, generator=generator, dtype=dtype, device=device)
    weight.mul_(k_in**-0.5)
    return GemmInputs(x, weight)


def projection(inputs: GemmInputs) -> torch.Tensor:
    """The timed op: `x @ weight.T`, shape [M, n_out]."""
    return torch.nn.functional.linear(inputs.x, inputs.weight)
