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
# cuBLASLt fp8 (torch._scaled_mm) wants M, K and N divisible by 16 ("Expected trailing dimension of
# mat1 to be divisible by 16" on an H200 for gpt-oss-120b's TP8 K = 360). M is padded with rows,
# K and N with zeros: the product's real part is unchanged. vLLM does not pad K and N: its
# `cutlass_scaled_mm` (vllm/_custom_ops.py) sends a weight whose dims are not multiples of 16 to
# a Triton scaled-mm instead; the padded cuBLASLt call is this calibration's stand-in for it.
FP8_M_MULTIPLE = 16
FP8_KN_MULTIPLE = 16


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


def round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def fp8_padded_m(m_tokens: int) -> int:
    return round_up(m_tokens, FP8_M_MULTIPLE)


def fp8_padded_kn(n_out: int, k_in: int) -> tuple[int, int]:
    """(N, K) as the fp8 kernel runs them: each rounded up to a multiple of 16."""
    return round_up(n_out, FP8_KN_MULTIPLE), round_up(k_in, FP8_KN_MULTIPLE)


def fp8_gemm_bytes(m_tokens: int, n_out: int, k_in: int) -> int:
    """Bytes of one padded fp8 operand set (one byte per element), before allocating it."""
    n_run, k_run = fp8_padded_kn(n_out, k_in)
    return (fp8_padded_m(m_tokens) + n_run) * k_run


def make_fp8_gemm_inputs(m_tokens: int, n_out: int, k_in: int, device: str) -> Fp8GemmInputs:
    """Random operands cast to e4m3 (values O(1), well inside its range), unit scales; M, K and
    N padded to the kernel's alignment (`fp8_padded_kn`), the padding of K zero in both operands."""
    n_run, k_run = fp8_padded_kn(n_out, k_in)
    x = torch.zeros(fp8_padded_m(m_tokens), k_run, device=device)
    x[:, :k_in] = torch.randn(x.shape[0], k_in, device=device)
    weight = torch.zeros(n_run, k_run, device=device)
    weight[:n_out, :k_in] = torch.randn(n_out, k_in, device=device)
    one = torch.ones((), dtype=torch.float32, device=device)
    return Fp8GemmInputs(x.to(FP8_DTYPE), weight.to(FP8_DTYPE), one, one.clone())


def fp8_projection(inputs: Fp8GemmInputs) -> torch.Tensor:
    """The timed fp8 op: scaled `x @ weight.T` with a bf16 output, shape [M padded, n_out]."""
    return torch._scaled_mm(inputs.x, inputs.weight.t(), scale_a=inputs.scale_x, scale_b=inputs.scale_w,
                            out_dtype=torch.bfloat16)  # fmt: skip


@dataclass(frozen=True)
class GroupedGemmInputs:
    """Operands of one grouped expert GEMM: per expert e, `x[e]` [rows, k_in] times `weight[e]`
    [n_out, k_in]; fp8 groups carry per-expert `Fp8GemmInputs` instead (`fp8`)."""

    x: torch.Tensor | None
    weight: torch.Tensor | None
    fp8: tuple[Fp8GemmInputs, ...] = ()

    @property
    def n_bytes(self) -> int:
        if self.fp8:
            return sum(inputs.n_bytes for inputs in self.fp8)
        return _tensor_bytes(self.x) + _tensor_bytes(self.weight)


def make_grouped_inputs(n_experts: int, rows: int, n_out: int, k_in: int, dtype: torch.dtype,
                        device: str) -> GroupedGemmInputs:
    """Random operands for `n_experts` experts of `rows` rows each (fp8: padded as `make_fp8_gemm_inputs`)."""
    if dtype == FP8_DTYPE:
        return GroupedGemmInputs(None, None, tuple(make_fp8_gemm_inputs(rows, n_out, k_in, device)
                                                   for _ in range(n_experts)))
    x = torch.randn(n_experts, rows, k_in, dtype=dtype, device=device)
    weight = torch.randn(n_experts, n_out, k_in, dtype=dtype, device=device).mul_(k_in**-0.5)
    return GroupedGemmInputs(x, weight)


def grouped_bytes(n_experts: int, rows: int, n_out: int, k_in: int, dtype: torch.dtype) -> int:
    if dtype == FP8_DTYPE:
        return n_experts * fp8_gemm_bytes(rows, n_out, k_in)
    return n_experts * gemm_bytes(rows, n_out, k_in, dtype)


def grouped_projection(inputs: GroupedGemmInputs) -> object:
    """The timed grouped op: one batched matmul (bf16/fp16/fp32), or one `torch._scaled_mm`
    per expert (fp8), which a CUDA graph replays without launch gaps."""
    if inputs.fp8:
        return [fp8_projection(expert) for expert in inputs.fp8]
    return torch.bmm(inputs.x, inputs.weight.transpose(1, 2))
