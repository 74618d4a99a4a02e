"""Refit the b200 profile's FP4 GEMM ceiling (`efficiency.gemm_compute_max_by_dtype.fp4`) jointly with
the trtllm preset's overhead terms, on the split=fit rows of the bundled dense TensorRT-LLM tables
(v1.0, v0.19, v0.20) only. The grid is calibrate.trtllm_b200_attention's with the attention and NCCL scales left at 1.

For each ceiling on the grid: a copy of hwprofiles/b200.yaml with that ceiling, every fit row
simulated once with zero engine overhead (sim.validate.fit.tap_case), the overhead terms fitted
(fit_overhead, mean |error|), and the fit rows' errors printed. The score rows are never read.
Pick the ceiling with the smallest mean, write it into b200.yaml, then rerun
`infersim calibrate engine ... --engine trtllm --split fit` to write the overheads.

Run: python -m calibrate.trtllm_fp4_ceiling 0.46 0.42 0.38   (prints one JSON line per ceiling)
"""

from __future__ import annotations

import sys

from calibrate.trtllm_b200_attention import main as grid


def main(ceilings: list[float]) -> None:
    grid([1.0], ceilings, [1.0])


if __name__ == "__main__":
    main([float(x) for x in sys.argv[1:]] or [0.46, 0.42, 0.38])
