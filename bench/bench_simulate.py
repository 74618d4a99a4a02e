"""Speed benchmark: replay the whole bundled Splitwise conversation trace (19,366 requests) through one
Llama-2-7B replica on h100-sxm (TP 1), as a whole `infersim simulate` process per policy.

Target (issue 3): `continuous` in at most 5 s wall for the whole process on a 2-core machine.
Prints a table: process wall time, simulation wall time (inside the process), steps, steps/s, peak RSS.

    python bench/bench_simulate.py [--policies continuous,chunked,radix,static] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def run_once(policy: str, model: str, trace: str) -> dict:
    command = [sys.executable, "-m", "sim", "simulate", "--trace", trace, "--model", model, "--hardware", "h100-sxm",
               "--policy", policy, "--tp", "1", "--replicas", "1", "--json"]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    wall_s = time.perf_counter() - start
    summary = json.loads(done.stdout)
    return {"wall_s": wall_s, "sim_wall_s": summary["wall_time_s"], "n_steps": summary["n_steps"],
            "n_finished": summary["n_finished"], "n_rejected": summary["n_rejected"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", default="continuous,chunked,radix,static")
    parser.add_argument("--model", default="llama-2-7b")
    parser.add_argument("--trace", default="splitwise_conv")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rows = []
    for policy in args.policies.split(","):
        runs = [run_once(policy, args.model, args.trace) for _ in range(args.repeats)]
        best = min(runs, key=lambda r: r["wall_s"])
        rows.append((policy, best))
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"trace={args.trace} model={args.model} hardware=h100-sxm tp=1 replicas=1; best of {args.repeats}")
    print(f"{'policy':<11} {'process_s':>9} {'sim_s':>7} {'steps':>8} {'steps/s':>9} {'finished':>8} {'rejected':>8}")
    for policy, r in rows:
        rate = r["n_steps"] / r["sim_wall_s"]
        print(f"{policy:<11} {r['wall_s']:>9.2f} {r['sim_wall_s']:>7.2f} {r['n_steps']:>8} {rate:>9.0f} "
              f"{r['n_finished']:>8} {r['n_rejected']:>8}")
    print(f"peak RSS of the largest run: {peak_mib:.0f} MiB")


if __name__ == "__main__":
    main()
