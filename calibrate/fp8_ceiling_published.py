"""The FP8 dense-GEMM ceiling of Hopper (H100 SXM / H200 / H800: one GH100 die, 1,978.9 TFLOPS dense FP8 and
989.4 dense BF16), DERIVED from published measurements, not fitted on validation rows (issue 29).

The profiles' GEMM ceilings (`gemm_compute_max` 0.751 and the per-op 0.73-0.80) were measured on BF16 GEMMs
and had been applied unchanged to FP8. Derived here, the way experts_deepgemm was: published FP8 GEMM
throughputs at LLM shapes (N, K in 4096-28672, M in 128-16384) with per-tensor scales or none (what cuBLASLt
runs for TensorRT-LLM's ModelOpt FP8 checkpoints; one scale is one multiply in the epilogue), each as a share
of the FP8 peak, against the cost model's generic GEMM efficiency `ceiling x M / (M + half_M)` with the h200
profile's ramp (`sim/cost/roofline.py`); the ceiling is the least-squares value on log efficiency.

Cross-checks that do not enter: FP8-vs-BF16 pairs of the same shape, GPU and kernel family (the ratio of the two
shares, which `Efficiency.for_weight_dtype` applies to the per-op ceilings), a power-capped H100 and
block-scaled kernels. `python -m calibrate.fp8_ceiling_published` prints all of it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sim.cost.roofline import gemm_compute_efficiency
from sim.inputs.hardware import load_hardware

FP8_PEAK_TFLOPS = 1978.9  # dense, H100 SXM / H200 / H800 (hwprofiles/*: the datasheets' sparse figure / 2)
BF16_PEAK_TFLOPS = 989.4
RAMP_PROFILE = "h200"  # whose gemm_half_tokens / gemm_half_output_elems give the ramp (same on the three)


@dataclass(frozen=True)
class Point:
    """One published FP8 GEMM timing; bf16_tflops: the same source's BF16 GEMM of that shape, if it has one."""

    source: str
    gpu: str
    scaling: str
    m: int
    n: int
    k: int
    fp8_tflops: float
    bf16_tflops: float | None = None

    @property
    def share(self) -> float:
        return self.fp8_tflops / FP8_PEAK_TFLOPS

    @property
    def ratio(self) -> float | None:
        """FP8 share of the FP8 peak over BF16 share of the BF16 peak."""
        return None if self.bf16_tflops is None else self.share / (self.bf16_tflops / BF16_PEAK_TFLOPS)


def _tflops(m: int, n: int, k: int, seconds: float) -> float:
    return 2.0 * m * n * k / seconds / 1e12


_TL_FP16 = {4096: 736.0, 8192: 758.0, 16384: 766.0}  # xwhzz/tilelang benchmark/matmul/README.md (tilelang 17bd0a6)
_F8E = "meta-pytorch/float8_experimental PR {} (bench_matmul.py, torch._scaled_mm = cuBLASLt), H100, LLaMa-70B ffn.w13"
INPUTS: tuple[Point, ...] = (
    # tilelang benchmark/matmul_fp8/README.md, H800 SXM, driver 560.35.05, tilelang 6b1faf7, M = N = 8192,
    # autotuned, no scales: the official repo's run and the xwhzz fork's (same commit stated, other numbers)
    *(Point("tile-ai/tilelang benchmark/matmul_fp8/README.md", "H800", "none", 8192, 8192, k, tf, _TL_FP16[k])
      for k, tf in ((4096, 1378.0), (8192, 1461.0), (16384, 1523.0))),
    *(Point("xwhzz/tilelang benchmark/matmul_fp8/README.md", "H800", "none", 8192, 8192, k, tf, _TL_FP16[k])
      for k, tf in ((4096, 1467.0), (8192, 1507.0), (16384, 1541.0))),
    # shape (M, K, N) = (16384, 8192, 7168): the one in range of the four LLaMa-70B shapes (the others have
    # N 1280, K 1024, K 3584); fp8 / bf16 seconds 1.39e-3 / 3.57e-3 (PR 38, 2023-08) and 1.470e-3 / 3.445e-3
    # (PR 100, 2023-09); power not stated
    Point(_F8E.format(38), "H100", "per-tensor", 16384, 7168, 8192,
          _tflops(16384, 7168, 8192, 1.39e-3), _tflops(16384, 7168, 8192, 3.57e-3)),
    Point(_F8E.format(100), "H100", "per-tensor", 16384, 7168, 8192,
          _tflops(16384, 7168, 8192, 1.470e-3), _tflops(16384, 7168, 8192, 3.445e-3)),
)
CROSS_CHECKS: tuple[Point, ...] = (
    # pytorch/FBGEMM PR 2546 (2024-04-29), "H100 500W" (a power cap below the SXM's 700 W): CUTLASS row-wise
    # FP8 GEMM ("fp8 row gemm only") vs bf16 at 8192^3
    Point("pytorch/FBGEMM PR 2546, H100 at 500 W", "H100 500W", "row-wise", 8192, 8192, 8192, 1125.51, 585.23),
    # deepseek-ai/DeepGEMM README "Normal GEMMs for dense models" (55ab91f, 2025-03-25; H800 SXM5, NVCC 12.8) and
    # PR 81 (merged 2025-04-08, 256x128 tiles): 1x128 activation / 128x128 weight block scales
    Point("DeepGEMM README 2025-03", "H800", "block-scaled", 4096, 7168, 16384, 1426.0),
    Point("DeepGEMM README 2025-03", "H800", "block-scaled", 4096, 4096, 7168, 1265.0),
    Point("DeepGEMM PR 81", "H800", "block-scaled", 4096, 7168, 16384, 1500.0),
    Point("DeepGEMM PR 81", "H800", "block-scaled", 4096, 4096, 7168, 1377.0),
)


def _ramp(p: Point) -> float:
    """The cost model's generic GEMM efficiency at this shape for a ceiling of 1."""
    eff = load_hardware(RAMP_PROFILE).efficiency.model_copy(update={"gemm_compute_max": 1.0})
    return float(gemm_compute_efficiency(p.m, eff, p.n))


def fitted_ceiling(points: tuple[Point, ...] = INPUTS) -> float:
    """Least squares on log efficiency of ceiling x ramp(M, N): the geometric mean of share / ramp."""
    return math.exp(sum(math.log(p.share / _ramp(p)) for p in points) / len(points))


def derived_fp8_ceiling() -> float:
    """The profiles' `gemm_compute_max_by_dtype.fp8`, rounded as written there (3 decimals)."""
    return round(fitted_ceiling(), 3)


def main() -> None:
    ceiling = fitted_ceiling()
    print(f"{'source':<52} {'gpu':<9} {'scaling':<12} {'M':>5} {'N':>5} {'K':>6} {'TFLOPS':>7} {'share':>6} "
          f"{'model':>6} {'dev':>6} {'vs bf16':>7}")
    for label, points in (("inputs", INPUTS), ("cross-checks (not inputs)", CROSS_CHECKS)):
        print(f"-- {label}")
        for p in points:
            model = ceiling * _ramp(p)
            ratio = "" if p.ratio is None else f"{p.ratio:.3f}"
            print(f"{p.source[:52]:<52} {p.gpu:<9} {p.scaling:<12} {p.m:>5} {p.n:>5} {p.k:>6} {p.fp8_tflops:>7.0f} "
                  f"{p.share:>6.3f} {model:>6.3f} {p.share / model - 1:>+6.1%} {ratio:>7}")
    worst = max(INPUTS, key=lambda p: abs(math.log(p.share / (ceiling * _ramp(p)))))
    print(f"least squares on log efficiency over {len(INPUTS)} points: ceiling {ceiling:.4f} -> "
          f"{derived_fp8_ceiling()}; "
          f"largest deviation {worst.share / (ceiling * _ramp(worst)) - 1:+.1%} ({worst.source[:40]}, K {worst.k})")
    pairs = [p for p in INPUTS + CROSS_CHECKS if p.ratio is not None and p.scaling != "per-tensor"]
    r = math.exp(sum(math.log(p.ratio) for p in pairs) / len(pairs))
    per_tensor = ", ".join(f"{p.ratio:.2f}" for p in INPUTS if p.scaling == "per-tensor")
    print(f"cross-check: FP8/BF16 share ratio, tilelang + FBGEMM pairs ({len(pairs)}): {r:.4f} -> 0.751 x r = "
          f"{0.751 * r:.3f}; the float8_experimental pairs give {per_tensor}"
          f" (its BF16 at {min(p.bf16_tflops for p in INPUTS if p.scaling == 'per-tensor') / BF16_PEAK_TFLOPS:.2f}-"
          f"{max(p.bf16_tflops for p in INPUTS if p.scaling == 'per-tensor') / BF16_PEAK_TFLOPS:.2f} of the BF16 peak)")


if __name__ == "__main__":
    main()
