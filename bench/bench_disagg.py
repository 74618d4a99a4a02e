"""Aggregated vs disaggregated prefill/decode at equal GPU count (a table; minutes of CPU).

The Azure 2023 LLM inference conversation trace (bundled), Llama-3-70B on h100-sxm with TP 4 per
replica, chunked prefill everywhere (the default token budget per step); each
P:D layout next to the aggregated cluster of the same number of replicas (least_outstanding
routing). The load grows with the cluster: --loads are multiples of the trace's own rate PER
REPLICA, so rows compare per GPU. KV moves over NVLink while the cluster fits one 8-GPU node,
over the 400 Gb/s NIC (RDMA) beyond. Goodput = finished requests meeting both SLOs per second;
per GPU divides by the cluster's GPUs.

    python bench/bench_disagg.py [--loads 1,1.5,2] [--max-requests 4000] [--ttft-slo 2] [--tpot-slo 0.05]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim.inputs.config import EngineConfig
from sim.run.disagg_compare import compare_splits
from sim.run.invoke import load_run_workload

COLUMNS = ("layout", "gpus", "finished", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "slo_met",
           "goodput_req_s", "goodput_per_gpu", "kv_transfer_p99_s")


def fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--loads", default="1,1.5,2")
    parser.add_argument("--ratios", default="1:1,1:2,1:3,2:1,3:1")
    parser.add_argument("--max-requests", type=int, default=4000)
    parser.add_argument("--ttft-slo", type=float, default=2.0)
    parser.add_argument("--tpot-slo", type=float, default=0.05)
    parser.add_argument("--hardware", default="h100-sxm")
    parser.add_argument("--tp", type=int, default=4)
    args = parser.parse_args()
    base = EngineConfig(model="llama-3-70b", hardware=args.hardware, tp=args.tp, policy="chunked",
                        slo={"ttft_s": args.ttft_slo, "tpot_s": args.tpot_slo})
    ratios = [tuple(int(x) for x in pair.split(":")) for pair in args.ratios.split(",")]
    for load in (float(x) for x in args.loads.split(",")):
        def workload_for(n_replicas: int, load=load):
            return load_run_workload("AzureLLMInferenceTrace_conv", rate_scale=load * n_replicas,
                                     max_requests=args.max_requests)

        one = workload_for(1)
        rate = len(one) / float(one.arrival_s[-1] - one.arrival_s[0])
        print(f"\nAzure conv, first {len(one)} requests at {load:g} x the trace's rate per replica "
              f"({rate:.2f} req/s per replica); llama-3-70b, {args.hardware} TP{args.tp} per replica; "
              f"SLO TTFT <= {args.ttft_slo} s, TPOT <= {args.tpot_slo} s")
        results = compare_splits(base, workload_for, ratios)
        rows = [[fmt(r.row()[c]) for c in COLUMNS] for r in results]
        widths = [max(len(c), *(len(row[i]) for row in rows)) for i, c in enumerate(COLUMNS)]
        print("  ".join(c.rjust(w) for c, w in zip(COLUMNS, widths)))
        for row in rows:
            print("  ".join(v.rjust(w) for v, w in zip(row, widths)), flush=True)


if __name__ == "__main__":
    main()
