"""The FP8 dense-GEMM ceiling of Hopper (H100 SXM / H200 / H800: one GH100 die, 1,978.9 TFLOPS dense FP8 and
989.4 dense BF16), DERIVED from published measurements, not fitted on validation rows (issue 29).

The profiles' GEMM ceilings (`gemm_compute_max` 0.751 and the per-op 0.73-0.80) were measured on BF16 GEMMs.
What the cost model needs for FP8 weights is the share of the FP8 peak an FP8 GEMM reaches at the same shape,
and `Efficiency.for_weight_dtype` scales the dense and per-op ceilings together by
`gemm_compute_max_by_dtype.fp8 / gemm_compute_max`. So the figure derived here is that ratio, measured where the
published tables give an FP8 and a BF16 GEMM of the same shape, on the same GPU, with the same kernel family:

    r = (FP8 TFLOPS / FP8 peak) / (BF16 TFLOPS / BF16 peak),    fp8 ceiling = gemm_compute_max x r

r is the least-squares value of log r over the paired points (their geometric mean). Only compute-bound LLM
shapes enter (N, K in 4096-28672, M in 128-16384, M large enough that the compute ramp is flat): the ramp,
the memory term and tile rounding are the cost model's own and apply to both dtypes alike.

`python -m calibrate.fp8_ceiling_published` prints every published point, the ratios, the derived ceiling,
the largest deviation, and the cross-checks that did not enter (absolute FP8 shares, block-scaled kernels).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

FP8_PEAK_TFLOPS = 1978.9  # dense, H100 SXM / H200 / H800 (hwprofiles/*: datasheets' sparse figure / 2)
BF16_PEAK_TFLOPS = 989.4
BF16_DENSE_CEILING = 0.751  # the profiles' gemm_compute_max (Vidur's BF16 H100 GEMMs)


@dataclass(frozen=True)
class PairedPoint:
    """One shape both dtypes were timed at, by the same source, on the same GPU."""

    source: str
    gpu: str
    scaling: str  # how the FP8 kernel scales its inputs
    m: int
    n: int
    k: int
    fp8_tflops: float
    bf16_tflops: float

    @property
    def ratio(self) -> float:
        return (self.fp8_tflops / FP8_PEAK_TFLOPS) / (self.bf16_tflops / BF16_PEAK_TFLOPS)


_TILELANG_FP16 = {4096: 736.0, 8192: 758.0, 16384: 766.0}  # xwhzz/tilelang benchmark/matmul/README.md (H800)
_TILELANG_SRC = ("tilelang benchmark READMEs, H800 SXM, driver 560.35.05, M = N = 8192, autotuned; "
                 "FP16: xwhzz/tilelang benchmark/matmul/README.md (tilelang 17bd0a6)")
PAIRED_POINTS: tuple[PairedPoint, ...] = (
    # FP8 run 1: tile-ai/tilelang benchmark/matmul_fp8/README.md (tilelang 6b1faf7); no scales (= per-tensor)
    *(PairedPoint(_TILELANG_SRC + "; FP8: tile-ai/tilelang benchmark/matmul_fp8/README.md", "H800", "none",
                  8192, 8192, k, fp8, _TILELANG_FP16[k]) for k, fp8 in ((4096, 1378.0), (8192, 1461.0), (16384, 1523.0))),
    # FP8 run 2: the same README in the xwhzz/tilelang fork (same tilelang commit stated, a later run)
    *(PairedPoint(_TILELANG_SRC + "; FP8: xwhzz/tilelang benchmark/matmul_fp8/README.md", "H800", "none",
                  8192, 8192, k, fp8, _TILELANG_FP16[k]) for k, fp8 in ((4096, 1467.0), (8192, 1507.0), (16384, 1541.0))),
    # pytorch/FBGEMM PR 2546 (2024-04-29), "H100 500W": CUTLASS FP8 row-wise GEMM ("fp8 row gemm only",
    # no quantization) vs bf16, shape (8192, 8192, 8192). Its other two shapes have M = 65536 (outside the range).
    PairedPoint("pytorch/FBGEMM PR 2546, H100 500 W, (M, N, K) = (8192, 8192, 8192)", "H100 (500 W)",
                "row-wise (per-token x per-channel)", 8192, 8192, 8192, 1125.51, 585.23),
)


@dataclass(frozen=True)
class AbsolutePoint:
    """An FP8 GEMM's throughput without a same-source BF16 partner: a cross-check, not an input."""

    source: str
    scaling: str
    m: int
    n: int
    k: int
    fp8_tflops: float

    @property
    def share(self) -> float:
        return self.fp8_tflops / FP8_PEAK_TFLOPS


CROSS_CHECKS: tuple[AbsolutePoint, ...] = (
    # deepseek-ai/DeepGEMM README "Normal GEMMs for dense models" (commit 55ab91f, 2025-03-25), H800 SXM5,
    # NVCC 12.8; FP8 with 1x128 activation / 128x128 weight block scales (promotion on CUDA cores)
    AbsolutePoint("DeepGEMM README 2025-03, H800", "block 1x128 / 128x128", 4096, 7168, 16384, 1426.0),
    AbsolutePoint("DeepGEMM README 2025-03, H800", "block 1x128 / 128x128", 4096, 4096, 7168, 1265.0),
    # deepseek-ai/DeepGEMM PR 81 (merged 2025-04-08, 256x128 block tile), H800 SXM, CUDA 12.8.1
    AbsolutePoint("DeepGEMM PR 81, H800", "block 1x128 / 128x128", 4096, 7168, 16384, 1500.0),
    AbsolutePoint("DeepGEMM PR 81, H800", "block 1x128 / 128x128", 4096, 4096, 7168, 1377.0),
)


def derived_ratio(points: tuple[PairedPoint, ...] = PAIRED_POINTS) -> float:
    """Least squares on log r: the geometric mean of the points' FP8-to-BF16 share ratios."""
    return math.exp(sum(math.log(p.ratio) for p in points) / len(points))


def derived_fp8_ceiling(points: tuple[PairedPoint, ...] = PAIRED_POINTS) -> float:
    """The profiles' `gemm_compute_max_by_dtype.fp8`, rounded as written there (3 decimals)."""
    return round(BF16_DENSE_CEILING * derived_ratio(points), 3)


def main() -> None:
    r = derived_ratio()
    print(f"{'source':<44} {'gpu':<13} {'M':>5} {'N':>5} {'K':>6} {'fp8 TF':>7} {'bf16 TF':>7} "
          f"{'fp8 share':>9} {'bf16 share':>10} {'ratio':>6} {'dev':>6}")
    for p in PAIRED_POINTS:
        short = p.source.split("; FP8: ")[-1][:44]
        print(f"{short:<44} {p.gpu:<13} {p.m:>5} {p.n:>5} {p.k:>6} {p.fp8_tflops:>7.0f} {p.bf16_tflops:>7.0f} "
              f"{p.fp8_tflops / FP8_PEAK_TFLOPS:>9.3f} {p.bf16_tflops / BF16_PEAK_TFLOPS:>10.3f} "
              f"{p.ratio:>6.3f} {p.ratio / r - 1:>+6.1%}")
    worst = max(PAIRED_POINTS, key=lambda p: abs(math.log(p.ratio / r)))
    print(f"least squares on log ratio: r = {r:.4f} over {len(PAIRED_POINTS)} points; largest deviation "
          f"{worst.ratio / r - 1:+.1%} ({worst.gpu}, K {worst.k})")
    print(f"fp8 ceiling = {BF16_DENSE_CEILING} x {r:.4f} = {derived_fp8_ceiling()} "
          f"(per-op ceilings scale by the same {r:.4f})")
    print("cross-checks (not inputs):")
    shares = [p.fp8_tflops / FP8_PEAK_TFLOPS for p in PAIRED_POINTS if p.gpu == "H800"]
    print(f"  unscaled FP8 on H800 (tilelang, K 4096-16384): share {min(shares):.3f}-{max(shares):.3f} of the FP8 peak")
    for c in CROSS_CHECKS:
        print(f"  {c.source:<32} {c.scaling:<22} M {c.m} N {c.n} K {c.k}: {c.fp8_tflops:.0f} TF = {c.share:.3f}")


if __name__ == "__main__":
    main()
