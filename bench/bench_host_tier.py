"""The host-memory tier of the radix prefix cache on the Mooncake conversation trace (a table).

Llama-3.1-8B (128k context, which the trace's long prompts need) on one h100-sxm, radix with
chunked prefill; GPU-only vs host tiers of increasing size (--cpu-cache-gib, per GPU). Hit rates
per tier (share of prompt tokens served by each), TTFT, and the infinite-cache hit rate of the
same requests from their hash ids as the ceiling.

    python bench/bench_host_tier.py [--rate-scale 0.3] [--max-requests 3000] [--tiers 0,64,256,1024]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim.inputs.config import EngineConfig
from sim.inputs.workload import prefix_hit_rate_infinite
from sim.run.invoke import load_run_workload, run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate-scale", type=float, default=0.3)
    parser.add_argument("--max-requests", type=int, default=3000)
    parser.add_argument("--tiers", default="0,64,256,1024")
    parser.add_argument("--model", default="llama-3.1-8b")
    parser.add_argument("--tp", type=int, default=1)
    args = parser.parse_args()
    workload = load_run_workload("mooncake_conversation", rate_scale=args.rate_scale, max_requests=args.max_requests)
    ceiling = prefix_hit_rate_infinite(workload)
    header = ["cpu GiB", "hit all", "hit gpu", "hit host", "ttft mean s", "ttft p50 s", "ttft p99 s",
              "finished", "host loads (blocks)", "wall s"]
    rows = []
    for gib in (float(x) for x in args.tiers.split(",")):
        cfg = EngineConfig(model=args.model, tp=args.tp, policy="radix", cpu_cache_gib=gib)
        out = run(cfg, workload)
        s = out.summary
        loads = sum(r.sched.host_loads.tier.n_loaded for r in out.result.replicas if r.sched.host_loads)
        rows.append([f"{gib:g}", f"{s['prefix_hit_rate']:.3f}", f"{s['prefix_hit_rate_gpu']:.3f}",
                     f"{s['prefix_hit_rate_host']:.3f}", f"{s['ttft_s']['mean']:.2f}", f"{s['ttft_s']['p50']:.2f}",
                     f"{s['ttft_s']['p99']:.2f}", str(s["n_finished"]), str(loads), f"{s['wall_time_s']:.1f}"])
    print(f"mooncake_conversation x{args.rate_scale:g}, first {len(workload)} requests; {args.model} on 1 x "
          f"h100-sxm TP{args.tp}, radix (chunked); infinite-cache hit rate {ceiling:.3f}")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print("  ".join(h.rjust(w) for h, w in zip(header, widths)))
    for r in rows:
        print("  ".join(v.rjust(w) for v, w in zip(r, widths)))


if __name__ == "__main__":
    main()
