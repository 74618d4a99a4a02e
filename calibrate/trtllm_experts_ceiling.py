"""Fit the one-GPU routed-experts grouped-GEMM ceiling of a GPU profile, `efficiency.gemm_compute_max_by_op.experts`
(sim/cost/moe.py), on the split=fit one-GPU rows (tp == 1) of the TensorRT-LLM MoE perf-overview table only.

For each ceiling on the grid: a copy of hwprofiles/<gpu>.yaml with it, every split=fit tp-1 row of that GPU in
sim/validate/cases/trtllm_perf_overview_moe_v1.0.csv predicted with the trtllm preset as it stands, and the median
|error| printed. The split=score rows are never read. Pick the smallest median and write it into the profile with
its provenance. (The multi-GPU rows take `experts_ep` instead: calibrate.trtllm_ep_experts_ceiling.)

Run: python -m calibrate.trtllm_experts_ceiling b200 0.10,0.12,0.14   (one JSON line per point)
"""

from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml

from sim.paths import bundled_dir
from sim.validate.cases import bundled_case_files, load_cases
from sim.validate.names import gpu_name
from sim.validate.run import predict

CASES = "trtllm_perf_overview_moe_v1.0.csv"
OP = "experts"


def fit_rows(gpu: str) -> list:
    path = next(p for p in bundled_case_files() if p.name == CASES)
    return [c for c in load_cases([path]) if c.split == "fit" and c.tp == 1 and gpu_name(c.case_id, c.gpu) == gpu]


def profile_with(gpu: str, ceiling: float) -> dict:
    """hwprofiles/<gpu>.yaml with the one-GPU experts ceiling replaced."""
    base = yaml.safe_load((bundled_dir("hwprofiles") / f"{gpu}.yaml").read_text())
    eff = dict(base["efficiency"])
    eff["gemm_compute_max_by_op"] = {**(eff.get("gemm_compute_max_by_op") or {}), OP: ceiling}
    return {**base, "efficiency": eff}


def main(gpu: str, ceilings: list[float]) -> None:
    rows = fit_rows(gpu)
    with tempfile.TemporaryDirectory() as tmp:
        for ceiling in ceilings:
            path = Path(tmp) / f"{gpu}-experts-{ceiling}.yaml"
            path.write_text(yaml.safe_dump(profile_with(gpu, ceiling)))
            errors = [predict(dataclasses.replace(c, gpu=str(path))).error for c in rows]
            signed = np.array([e for e in errors if e is not None])
            print(json.dumps({"gpu": gpu, "experts_ceiling": ceiling, "n_fit_rows": len(signed),
                              "median_abs_error": round(float(np.median(abs(signed))), 4),
                              "median_error": round(float(np.median(signed)), 4)}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], [float(x) for x in sys.argv[2].split(",")])
