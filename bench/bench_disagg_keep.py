"""Disaggregation keeps every request: finished / rejected per engine preset on 2,000 requests (seconds).

Each engine preset (vLLM, SGLang, TensorRT-LLM) runs Llama-3.1-8B on h100-sxm as 1 prefill + 1 decode
replica, on two workloads: a `--bench` burst of 2,000 requests of 1,024 in / 256 out all at t=0, and the
first 2,000 requests of the bundled Azure 2023 conversation trace at 4x its rate. Every request should
finish; before the hand-off returned the prefill side's full-length reservation (TensorRT-LLM's
`reserve_full`) the TensorRT-LLM rows rejected most of them once the prefill pool had filled.

    python bench/bench_disagg_keep.py [--requests 2000]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim.inputs.config import EngineConfig
from sim.inputs.workload.bench import bench_workload
from sim.run.invoke import load_run_workload
from sim.run.load_check import rejections
from sim.run.simulate import simulate
from sim.run.summary import requests_columns, summarize

ENGINES = ("vllm", "sglang", "trtllm")


def workloads(n_requests: int) -> dict:
    return {f"burst {n_requests} x 1024/256": bench_workload(f"requests={n_requests},isl=1024,osl=256"),
            f"azure conv {n_requests} x4": load_run_workload("AzureLLMInferenceTrace_conv", rate_scale=4.0,
                                                             max_requests=n_requests)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    print(f"{'engine':8} {'workload':28} {'finished':>8} {'rejected':>8} {'preempted':>9}  first rejection")
    all_finished = True
    for name, workload in workloads(args.requests).items():
        for engine in ENGINES:
            cfg = EngineConfig(engine=engine, model="llama-3.1-8b", hardware="h100-sxm", prefill_replicas=1,
                               decode_replicas=1)
            result = simulate(cfg, workload)
            columns = requests_columns(result)
            summary = summarize(result, columns)
            first = rejections(columns)["first_reason"] or "-"
            all_finished &= summary["n_rejected"] == 0 and summary["n_finished"] == summary["n_requests"]
            print(f"{engine:8} {name:28} {summary['n_finished']:8d} {summary['n_rejected']:8d} "
                  f"{summary['preemptions']:9d}  {first}", flush=True)
    print("every request finished" if all_finished else "REQUESTS LOST")
    sys.exit(0 if all_finished else 1)


if __name__ == "__main__":
    main()
