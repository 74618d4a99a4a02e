"""Fit the H100 / H200 profiles' expert-parallel grouped-GEMM ceiling (`efficiency.gemm_compute_max_by_op.experts_ep`,
the one `sim.cost.expert_parallel` reads before `experts`)
on the split=fit multi-GPU rows (attention DP + EP) of the TensorRT-LLM MoE perf-overview table only.

For each ceiling on the grid: a copy of hwprofiles/<gpu>.yaml with that ceiling, every split=fit
row of that GPU with tp > 1 in sim/validate/cases/trtllm_perf_overview_moe_v1.0.csv predicted with
the trtllm preset as it stands, and the median |error| printed. The split=score rows are never
read. Pick the ceiling with the smallest median and write it into the profile with its provenance.

Run: python -m calibrate.trtllm_ep_experts_ceiling h100-sxm,h200 0.2 0.15 0.1   (one JSON line per ceiling)
"""

from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml

from sim.cost.expert_parallel import EP_EXPERTS_OP
from sim.paths import bundled_dir
from sim.validate.cases import bundled_case_files, load_cases
from sim.validate.names import gpu_name
from sim.validate.run import predict

CASES = "trtllm_perf_overview_moe_v1.0.csv"


def fit_rows(gpu: str) -> list:
    path = next(p for p in bundled_case_files() if p.name == CASES)
    return [c for c in load_cases([path]) if c.split == "fit" and c.tp > 1 and gpu_name(c.case_id, c.gpu) == gpu]


def main(gpus: list[str], ceilings: list[float]) -> None:
    """One ceiling shared by `gpus` (the same die: H100 SXM and H200 are both GH100), each
    profile copied with it, the fit rows of all of them pooled."""
    with tempfile.TemporaryDirectory() as tmp:
        for ceiling in ceilings:
            errors = []
            for gpu in gpus:
                base = yaml.safe_load((bundled_dir("hwprofiles") / f"{gpu}.yaml").read_text())
                by_op = {**(base["efficiency"].get("gemm_compute_max_by_op") or {}), EP_EXPERTS_OP: ceiling}
                profile = {**base, "efficiency": {**base["efficiency"], "gemm_compute_max_by_op": by_op}}
                path = Path(tmp) / f"{gpu}-experts-{ceiling}.yaml"
                path.write_text(yaml.safe_dump(profile))
                errors += [predict(dataclasses.replace(c, gpu=str(path))).error for c in fit_rows(gpu)]
            errors = np.array([abs(e) for e in errors if e is not None])
            print(json.dumps({"gpus": gpus, "experts_ceiling": ceiling, "n_fit_rows": len(errors),
                              "median_abs_error": round(float(np.median(errors)), 4)}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1].split(","), [float(x) for x in sys.argv[2:]])
