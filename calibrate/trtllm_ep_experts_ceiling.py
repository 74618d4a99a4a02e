"""Fit the expert-parallel grouped-GEMM compute ramp of GPU profiles, `efficiency.gemm_compute_max_by_op.experts_ep`
(the ceiling) and `efficiency.gemm_half_tokens_by_op.experts_ep` (the rows per expert at half the ceiling), the
terms `sim.cost.expert_parallel` reads before `experts`, on the split=fit multi-GPU rows (attention DP + EP) of the
TensorRT-LLM MoE perf-overview table only.

For each (ceiling, half rows) on the grid: a copy of hwprofiles/<gpu>.yaml with them, every split=fit row of that
GPU with tp > 1 in sim/validate/cases/trtllm_perf_overview_moe_v1.0.csv predicted with the trtllm preset as it
stands, and the median |error| printed. The split=score rows are never read. Pick the point with the smallest
median and write it into the profile with its provenance.

The ramp ceiling * M / (M + half) prices a grouped GEMM's compute as proportional to pairs + half x experts
touched: `half` is the rows of padding and pipeline fill every expert's GEMM costs (a batch-independent cost per
step once a decode batch touches all its experts), the ceiling the large-M efficiency (prefill).

Run: python -m calibrate.trtllm_ep_experts_ceiling h100-sxm,h200 0.3,0.5 128,256   (one JSON line per point;
a ceiling list, then a half-rows list; without the half list the profile's own half point is kept)
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


def profile_with(gpu: str, ceiling: float, half_rows: float | None, op: str = EP_EXPERTS_OP) -> dict:
    """hwprofiles/<gpu>.yaml with the `op` ceiling (and half point, unless None) replaced."""
    base = yaml.safe_load((bundled_dir("hwprofiles") / f"{gpu}.yaml").read_text())
    eff = dict(base["efficiency"])
    eff["gemm_compute_max_by_op"] = {**(eff.get("gemm_compute_max_by_op") or {}), op: ceiling}
    if half_rows is not None:
        eff["gemm_half_tokens_by_op"] = {**(eff.get("gemm_half_tokens_by_op") or {}), op: half_rows}
    return {**base, "efficiency": eff}


def grid(gpus: list[str], ceilings: list[float], halves: list[float | None], rows_of, op: str) -> None:
    """One JSON line per (ceiling, half) point: the median |error| of `rows_of(gpu)` pooled over `gpus`,
    each predicted on a copy of its profile with the `op` ramp set to the point."""
    with tempfile.TemporaryDirectory() as tmp:
        for half_rows in halves:
            for ceiling in ceilings:
                errors = []
                for gpu in gpus:
                    path = Path(tmp) / f"{gpu}-{op}-{ceiling}-{half_rows}.yaml"
                    path.write_text(yaml.safe_dump(profile_with(gpu, ceiling, half_rows, op)))
                    errors += [predict(dataclasses.replace(c, gpu=str(path))).error for c in rows_of(gpu)]
                signed = np.array([e for e in errors if e is not None])
                print(json.dumps({"gpus": gpus, "op": op, "experts_ceiling": ceiling, "experts_half_tokens": half_rows,
                                  "n_fit_rows": len(signed),
                                  "median_abs_error": round(float(np.median(abs(signed))), 4),
                                  "median_error": round(float(np.median(signed)), 4)}), flush=True)


def main(gpus: list[str], ceilings: list[float], halves: list[float | None]) -> None:
    """One ramp shared by `gpus` (the same die: H100 SXM and H200 are both GH100), each profile
    copied with it, the fit rows of all of them pooled."""
    grid(gpus, ceilings, halves, fit_rows, EP_EXPERTS_OP)


if __name__ == "__main__":
    halves_arg = [float(x) for x in sys.argv[3].split(",")] if len(sys.argv) > 3 else [None]
    main(sys.argv[1].split(","), [float(x) for x in sys.argv[2].split(",")], halves_arg)
