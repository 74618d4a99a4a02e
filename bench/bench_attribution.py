"""Latency attribution per policy: where the p50 and p99 requests' time goes, as a table and a plot.

The Azure 2023 conversation trace (Vidur's re-timed Splitwise copy) on one Llama-3-8B / h100-sxm
replica, sped up until the replica is loaded, through continuous, chunked and radix (static with
--with-static). Continuous batching makes
running decodes sit out every new prompt's prefill step ("interference"); chunked prefill shares
steps, so the same requests lose less time to others' prefills.

    python bench/bench_attribution.py [--rate-scale 3] [--max-requests 4000] [--plot attribution.png]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim.inputs.config import EngineConfig
from sim.run.attribution import PARTS
from sim.run.invoke import load_run_workload, run
from sim.run.report.attribution_plot import save_attribution_figure


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate-scale", type=float, default=3.0)
    parser.add_argument("--max-requests", type=int, default=4000)
    parser.add_argument("--plot", type=Path, default=Path("attribution.png"))
    parser.add_argument("--with-static", action="store_true", help="also static batching (its queue dwarfs the rest)")
    args = parser.parse_args()
    workload = load_run_workload("splitwise_conv", rate_scale=args.rate_scale, max_requests=args.max_requests)
    summaries = {}
    policies = ("static",) * args.with_static + ("continuous", "chunked", "radix")
    for policy in policies:
        cfg = EngineConfig(model="llama-3-8b", policy=policy, max_model_len=8192)
        summaries[policy] = run(cfg, workload).summary
    header = ["policy", "rank", "e2e s", *[f"{p}" for p in PARTS], "itl p99 ms"]
    print(f"splitwise_conv x{args.rate_scale}, first {len(workload)} requests, llama-3-8b on 1 x h100-sxm "
          "(seconds of the p50 / p99 request by e2e)")
    print("  ".join(f"{h:>12}" for h in header))
    for policy, s in summaries.items():
        a = s["latency_attribution"]
        for rank in ("p50", "p99", "mean"):
            e2e = a.get(f"{rank}_e2e_s", s["e2e_s"]["mean"])
            cells = [policy, rank, f"{e2e:.3f}", *[f"{a[f'{rank}_{p}_s']:.3f}" for p in PARTS],
                     f"{s['itl_s']['p99'] * 1e3:.1f}"]
            print("  ".join(f"{c:>12}" for c in cells))
    print(f"plot: {save_attribution_figure(args.plot, summaries)}")


if __name__ == "__main__":
    main()
