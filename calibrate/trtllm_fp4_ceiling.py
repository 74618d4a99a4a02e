"""Refit the b200 profile's FP4 GEMM ceiling (`efficiency.gemm_compute_max_by_dtype.fp4`) jointly with
the trtllm preset's overhead terms, on the split=fit rows of the bundled TensorRT-LLM tables only.

For each ceiling on the grid: a copy of hwprofiles/b200.yaml with that ceiling, every fit row
simulated once with zero engine overhead (sim.validate.fit.tap_case), the overhead terms fitted
(fit_overhead, mean |error|), and the fit rows' errors printed. The score rows are never read.
Pick the ceiling with the smallest mean, write it into b200.yaml, then rerun
`infersim calibrate engine ... --engine trtllm --split fit` to write the overheads.

Run: python -m calibrate.trtllm_fp4_ceiling 0.46 0.42 0.38   (prints one JSON line per ceiling)
"""

from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml

from sim.engines.overhead import EngineOverhead
from sim.engines.preset import load_engine
from sim.paths import bundled_dir
from sim.validate.cases import bundled_case_files, load_cases
from sim.validate.fit import abs_errors, fit_overhead, tap_case


def _tap(cases):
    tapped = [tap_case(c, "trtllm") for c in cases]
    bad = [t for t in tapped if isinstance(t, str)]
    if bad:
        raise SystemExit(f"cannot fit on: {bad[:3]}")
    return tapped


def main(ceilings: list[float]) -> None:
    files = [p for p in bundled_case_files() if p.name.startswith("trtllm_perf_overview")]
    cases = [c for c in load_cases(files) if c.split == "fit"]
    b200 = [c for c in cases if c.gpu.lower() == "b200"]
    tap_other = _tap([c for c in cases if c.gpu.lower() != "b200"])
    base = yaml.safe_load((bundled_dir("hwprofiles") / "b200.yaml").read_text())
    start = EngineOverhead.from_preset(load_engine("trtllm"))
    with tempfile.TemporaryDirectory() as tmp:
        for ceiling in ceilings:
            profile = {**base, "efficiency": {**base["efficiency"], "gemm_compute_max_by_dtype": {"fp4": ceiling}}}
            path = Path(tmp) / f"b200-fp4-{ceiling}.yaml"
            path.write_text(yaml.safe_dump(profile))
            tap_b200 = _tap([dataclasses.replace(c, gpu=str(path)) for c in b200])
            fitted = fit_overhead(tap_other + tap_b200, start, "mean")
            errors = abs_errors(tap_other + tap_b200, fitted)
            print(json.dumps({
                "fp4_ceiling": ceiling, "n_fit_rows": len(errors), "per_step_us": round(fitted.per_step_s * 1e6, 1),
                "per_seq_us": round(fitted.per_seq_s * 1e6, 2), "per_token_us": round(fitted.per_token_s * 1e6, 3),
                "mean_abs_error": round(float(errors.mean()), 4),
                "median_abs_error_b200": round(float(np.median(abs_errors(tap_b200, fitted))), 4)}), flush=True)


if __name__ == "__main__":
    main([float(x) for x in sys.argv[1:]] or [0.46, 0.42, 0.38])
