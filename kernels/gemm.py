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


FP8_DTYPE = torch.float8_e4m3fn
FP8_M_MULTIPLE = 16  # cuBLASLt fp8 wants both dims of the first operand divisible by 16: M is padded


@dataclass(frozen=True)
class Fp8GemmInputs:
    """fp8 (e4m3) operands with per-tensor scales, as fp8 serving engines call `torch._scaled_mm`:
    `x` [M padded to 16, k_in], `weight` [n_out, k_in] (passed transposed: column-major)."""

    x: torch.Tensor
    weight: torch.Tensor
    scale_x: torch.Tensor
    scale_w: torch.Tensor

    @property
    def n_bytes(self) -> int:
        return _tensor_bytes(self.x) + _tensor_bytes(self.weight)


def fp8_padded_m(m_tokens: int) -> int:
    return -(-m_tokens // FP8_M_MULTIPLE) * FP8_M_MULTIPLE


def make_fp8_gemm_inputs(m_tokens: int, n_out: int, k_in: int, device: str) -> Fp8GemmInputs:
    """Random operands cast to e4m3 (values O(1), well inside its range), unit scales."""
    x = torch.randn(fp8_padded_m(m_tokens), k_in, device=device).to(FP8_DTYPE)
    weight = torch.randn(n_out, k_in, device=device).to(FP8_DTYPE)
    one = torch.ones((), dtype=torch.float32, device=device)
    return Fp8GemmInputs(x, weight, one, one.clone())


def fp8_projection(inputs: Fp8GemmInputs) -> torch.Tensor:
    """The timed fp8 op: scaled `x @ weight.T` with a bf16 output, shape [M padded, n_out]."""
    return torch._scaled_mm(inputs.x, inputs.weight.t(), scale_a=inputs.scale_x, scale_b=inputs.scale_w,
                            out_dtype=torch.bfloat16)  # fmt: skip
