"""Fit the one-GPU routed-experts grouped-GEMM ceiling of a GPU profile, `efficiency.gemm_compute_max_by_op.experts`
(sim/cost/moe.py), on the split=fit one-GPU rows (tp == 1) of the TensorRT-LLM MoE perf-overview table only.

For each ceiling on the grid: a copy of hwprofiles/<gpu>.yaml with it, every split=fit tp-1 row of that GPU in
sim/validate/cases/trtllm_perf_overview_moe_v1.0.csv predicted with the trtllm preset as it stands, and the median
|error| printed. The split=score rows are never read. Pick the smallest median and write it into the profile with
its provenance. (The multi-GPU rows take `experts_ep` instead: calibrate.trtllm_ep_experts_ceiling.)

Run: python -m calibrate.trtllm_experts_ceiling b200 0.10,0.12,0.14   (one JSON line per point)
"""

from __future__ import annotations

import sys

from calibrate.trtllm_ep_experts_ceiling import CASES, grid
from sim.validate.cases import bundled_case_files, load_cases
from sim.validate.names import gpu_name

OP = "experts"


def fit_rows(gpu: str) -> list:
    path = next(p for p in bundled_case_files() if p.name == CASES)
    return [c for c in load_cases([path]) if c.split == "fit" and c.tp == 1 and gpu_name(c.case_id, c.gpu) == gpu]


def main(gpu: str, ceilings: list[float]) -> None:
    grid([gpu], ceilings, [None], fit_rows, OP)


if __name__ == "__main__":
    main(sys.argv[1], [float(x) for x in sys.argv[2].split(",")])
