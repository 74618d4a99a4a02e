"""Speed of data-parallel-attention ranks in lockstep (sim/engine/lockstep.py), aggregated and disaggregated.

    PYTHONPATH=$PWD python bench/bench_lockstep.py [--cases NAME,NAME]

One row per run: CPU seconds of the simulation, requests finished, P99 TPOT, and a digest of its
outputs (summary.json less wall_time_s, and the requests table). Run it on two trees to time a
change; equal digests mean the outputs are the same bit for bit. The deepseek rows are the
whole-workload runs of `bench/bench_plan.py --case deepseek` (bench/plan_layouts_case.py: the
first 4,000 requests of splitwise_conv re-timed to 20 req/s), its P:D layouts and aggregated
candidates; the qwen row is a smaller aggregated DP4 replica.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time

import numpy as np
from rich.console import Console
from rich.table import Table

from sim.inputs.config import EngineConfig
from sim.inputs.workload import load_workload
from sim.inputs.workload.transforms import scale_rate
from sim.run.simulate import simulate
from sim.run.summary import requests_frame, summarize

DEEPSEEK = dict(model="deepseek-r1", weight_dtype="fp8", policy="chunked", hardware="gb200-nvl72")
GROUP = {"tp": 1, "dp": 8, "enable_expert_parallel": True, "moe_a2a_backend": "nccl"}  # dp8 x tp1 ep8
CASES = {
    "deepseek-r1 gb200 P:D 1P:1D, dp8 x tp1 ep8 groups": dict(DEEPSEEK, prefill=GROUP, decode=GROUP,
                                                             prefill_replicas=1, decode_replicas=1),
    "deepseek-r1 gb200 P:D 1P:2D, dp8 x tp1 ep8 groups": dict(DEEPSEEK, prefill=GROUP, decode=GROUP,
                                                             prefill_replicas=1, decode_replicas=2),
    "deepseek-r1 gb200 aggregated dp8 x tp1 ep8": dict(DEEPSEEK, tp=8, dp=8, ep=8, enable_dp_attention=True),
    "deepseek-r1 gb200 aggregated dp2 x tp4 ep8": dict(DEEPSEEK, tp=8, dp=2, ep=8, enable_dp_attention=True),
    "qwen3-30b-a3b h100 aggregated dp4 x tp1 ep4 (1,000 req, 10 req/s)":
        dict(model="qwen3-30b-a3b", hardware="h100-sxm", policy="chunked", tp=4, dp=4, ep=4,
             enable_dp_attention=True),
}


def workload(name: str):
    trace = load_workload("splitwise_conv")
    if name.startswith("qwen"):
        return scale_rate(trace.take(np.arange(1000)), target_qps=10.0, where="--target-qps")
    return scale_rate(trace.take(np.arange(4000)), target_qps=20.0, where="--target-qps")


def digest(result) -> str:
    summary = {k: v for k, v in summarize(result).items() if k != "wall_time_s"}
    frame = requests_frame(result)
    h = hashlib.sha256(json.dumps(summary, sort_keys=True, default=str).encode())
    for column in frame.columns:
        values = frame[column]
        h.update(values.to_numpy().tobytes() if values.dtype.kind in "biufcmM" else repr(values.tolist()).encode())
    return h.hexdigest()[:12]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=None, help="comma-separated case names (default: all)")
    args = parser.parse_args()
    names = list(CASES) if args.cases is None else args.cases.split(",")
    table = Table(title="lockstep runs (CPU s of the simulation alone; digest: summary less wall time + requests)")
    for column in ("run", "CPU s", "finished", "P99 TPOT ms", "outputs digest"):
        table.add_column(column)
    for name in names:
        cfg, trace = EngineConfig.model_validate(CASES[name]), workload(name)
        start_s = time.process_time()
        result = simulate(cfg, trace)
        cpu_s = time.process_time() - start_s
        summary = summarize(result)
        table.add_row(name, f"{cpu_s:.2f}", str(summary["n_finished"]), f"{summary['tpot_s']['p99'] * 1e3:.1f}",
                      digest(result))
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
