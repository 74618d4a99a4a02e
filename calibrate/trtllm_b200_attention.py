"""Refit the b200 profile's paged decode-attention bandwidth (`efficiency.paged_attention_memory`, one scale
on every block size's entry) jointly with the trtllm preset's overhead terms, on the split=fit rows of the
bundled TensorRT-LLM tables only; the FP4 GEMM ceiling may be gridded with it (it absorbs the same error).

For each (scale, fp4 ceiling) on the grid: a copy of hwprofiles/b200.yaml with those values, every fit row
simulated once with zero engine overhead (sim.validate.fit.tap_case), the overhead terms fitted
(fit_overhead, mean |error|), and the fit rows' errors printed. The score rows are never read. Pick the
point with the smallest mean, write it into b200.yaml, then rerun
`infersim calibrate engine ... --engine trtllm --split fit` to write the overheads.

Run: python -m calibrate.trtllm_b200_attention --scales 1.0 0.85 0.7 [--fp4 0.42 0.46] [--nccl 1.0 0.7 0.5]
     [--objective mean|median]
(one JSON line per point; 2026-12-02: flat, mean |error| 5.78 / 5.70 / 6.18 % over the attention scales and
5.78 / 5.78 / 6.20 % over the NCCL scales, so neither term was changed)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
from pathlib import Path

import numpy as np
import yaml

from sim.inputs.engines.overhead import EngineOverhead
from sim.inputs.engines.preset import load_engine
from sim.paths import bundled_dir
from sim.validate.cases import bundled_case_files, load_cases
from sim.validate.fit import abs_errors, fit_overhead, tap_case


def _tap(cases):
    tapped = [tap_case(c, "trtllm") for c in cases]
    bad = [t for t in tapped if isinstance(t, str)]
    if bad:
        raise SystemExit(f"cannot fit on: {bad[:3]}")
    return tapped


def profile_at(base: dict, scale: float, fp4: float | None, nccl: float = 1.0) -> dict:
    """`base` (the b200 profile) with every paged-attention entry times `scale`, the FP4 ceiling `fp4` and
    the NCCL all-reduce fits' bandwidth times `nccl`."""
    eff = dict(base["efficiency"])
    eff["paged_attention_memory"] = {k: round(v * scale, 4) for k, v in eff["paged_attention_memory"].items()}
    if fp4 is not None:
        eff["gemm_compute_max_by_dtype"] = {**eff.get("gemm_compute_max_by_dtype", {}), "fp4": fp4}
    out = {**base, "efficiency": eff}
    if nccl != 1.0:
        fits = base["collectives"]["allreduce"]["nccl"]
        scaled = {tp: {**fit, "bus_gb_s": round(fit["bus_gb_s"] * nccl, 2)} for tp, fit in fits.items()}
        out["collectives"] = {**base["collectives"], "allreduce": {**base["collectives"]["allreduce"], "nccl": scaled}}
    return out


def main(scales: list[float], fp4s: list[float | None], nccls: list[float], objective: str = "mean") -> None:
    files = [p for p in bundled_case_files() if p.name.startswith("trtllm_perf_overview_v")]  # the dense tables
    cases = [c for c in load_cases(files) if c.split == "fit"]
    b200 = [c for c in cases if c.gpu.lower() == "b200"]
    tap_other = _tap([c for c in cases if c.gpu.lower() != "b200"])
    base = yaml.safe_load((bundled_dir("hwprofiles") / "b200.yaml").read_text())
    start = EngineOverhead.from_preset(load_engine("trtllm"))
    with tempfile.TemporaryDirectory() as tmp:
        for fp4, scale, nccl in ((f, s, n) for f in fp4s for s in scales for n in nccls):
            path = Path(tmp) / f"b200-attn-{scale}-{fp4}-{nccl}.yaml"
            path.write_text(yaml.safe_dump(profile_at(base, scale, fp4, nccl)))
            tap_b200 = _tap([dataclasses.replace(c, gpu=str(path)) for c in b200])
            fitted = fit_overhead(tap_other + tap_b200, start, objective)
            errors = abs_errors(tap_other + tap_b200, fitted)
            print(json.dumps({
                "objective": objective, "attention_scale": scale, "fp4_ceiling": fp4, "nccl_scale": nccl,
                "n_fit_rows": len(errors),
                "per_step_us": round(fitted.per_step_s * 1e6, 1), "per_seq_us": round(fitted.per_seq_s * 1e6, 2),
                "per_token_us": round(fitted.per_token_s * 1e6, 3), "mean_abs_error": round(float(errors.mean()), 4),
                "median_abs_error": round(float(np.median(errors)), 4),
                "median_abs_error_b200": round(float(np.median(abs_errors(tap_b200, fitted))), 4)}), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", type=float, nargs="+", default=[1.0, 0.9, 0.8])
    parser.add_argument("--fp4", type=float, nargs="+", default=None, help="FP4 ceilings (default: the profile's)")
    parser.add_argument("--nccl", type=float, nargs="+", default=[1.0], help="NCCL all-reduce bandwidth scales")
    parser.add_argument("--objective", default="mean", help="fit_overhead objective: mean | median")
    args = parser.parse_args()
    main(args.scales, args.fp4 or [None], args.nccl, args.objective)
