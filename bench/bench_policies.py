"""The engine issue's experiments, as a table each (not a timed test; minutes of CPU).

A. The Azure 2023 conversation trace (Vidur's re-timed Splitwise copy) sped up until one Llama-3-8B /
   h100-sxm replica is loaded: the four policies side by side.
B. The Mooncake conversation trace on Llama-3.1-8B (Llama-3-8B's shape with a 128k context, which the
   trace's long prompts need): radix with a cache big enough for every distinct block vs the infinite-cache
   hit rate from the hash ids; radix and chunked with the real H100 cache size.

    python bench/bench_policies.py [--part A|B|AB] [--rate-scale 3] [--mooncake-rate-scale 1.0]
"""

from __future__ import annotations

import argparse

from sim.inputs.config import EngineConfig
from sim.inputs.workload import prefix_hit_rate_infinite
from sim.run.invoke import load_run_workload, run

COLUMNS = ("policy", "cache", "req/s", "out tok/s", "ttft mean s", "ttft p99 s", "itl p99 ms", "tpot mean ms",
           "kv use", "kv frag", "preempt", "hit", "evicted", "wall s")


def row(label: str, cache: str, s: dict) -> list:
    return [label, cache, f"{s['request_throughput']:.2f}", f"{s['output_throughput_tok_s']:.0f}",
            f"{s['ttft_s']['mean']:.3f}", f"{s['ttft_s']['p99']:.3f}", f"{s['itl_s']['p99'] * 1e3:.1f}",
            f"{s['tpot_s']['mean'] * 1e3:.1f}", f"{s['kv_utilization_mean']:.2f}", f"{s['kv_fragmentation']:.2f}",
            s["preemptions"], f"{s['prefix_hit_rate']:.3f}", s["evicted_blocks"], f"{s['wall_time_s']:.1f}"]


def show(title: str, rows: list[list]) -> None:
    print(f"\n{title}")
    widths = [max(len(str(c)), *(len(str(r[i])) for r in rows)) for i, c in enumerate(COLUMNS)]
    print("  ".join(str(c).rjust(w) for c, w in zip(COLUMNS, widths)))
    for r in rows:
        print("  ".join(str(v).rjust(w) for v, w in zip(r, widths)))


def part_a(rate_scale: float) -> None:
    workload = load_run_workload("splitwise_conv", rate_scale=rate_scale)
    rows = []
    for policy in ("static", "continuous", "chunked", "radix"):
        summary = run(EngineConfig(model="llama-3-8b", hardware="h100-sxm", policy=policy), workload).summary
        rows.append(row(policy, "h100", summary))
    show(f"A. splitwise_conv x{rate_scale} ({len(workload)} requests), llama-3-8b on 1 x h100-sxm", rows)


def part_b(rate_scale: float, budget_tokens: int) -> None:
    workload = load_run_workload("mooncake_conversation", rate_scale=rate_scale)
    infinite = prefix_hit_rate_infinite(workload)
    rows = []
    runs = (("radix", 6_000_000, "6M blocks"), ("radix", None, "h100"), ("chunked", None, "h100"))
    for policy, override, label in runs:
        cfg = EngineConfig(model="llama-3.1-8b", policy=policy, max_num_batched_tokens=budget_tokens,
                           num_gpu_blocks_override=override)
        rows.append(row(policy, label, run(cfg, workload).summary))
    show(f"B. mooncake_conversation x{rate_scale} ({len(workload)} requests), llama-3.1-8b on 1 x h100-sxm, "
         f"max_num_batched_tokens {budget_tokens}; infinite-cache hit rate from hash ids: {infinite:.4f}", rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", default="AB")
    parser.add_argument("--rate-scale", type=float, default=3.0)
    parser.add_argument("--mooncake-rate-scale", type=float, default=0.35)
    parser.add_argument("--max-num-batched-tokens", type=int, default=2048)
    args = parser.parse_args()
    if "A" in args.part:
        part_a(args.rate_scale)
    if "B" in args.part:
        part_b(args.mooncake_rate_scale, args.max_num_batched_tokens)


if __name__ == "__main__":
    main()
