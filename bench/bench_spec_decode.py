"""Speculative decoding: what it buys and where it stops paying (two tables; minutes of CPU).

A. Per decode step, from the cost model alone: Llama-3-70B on h100-sxm TP 4, every sequence at a
   1,300-token context. Speedup = expected tokens per step x (plain decode step) / (verify step of
   k+1 tokens per sequence + k draft proposals). Verify steps carry k+1 tokens per sequence, so
   they turn compute-bound at a batch k+1 times smaller than plain decode: the speedup falls with
   batch size and drops below 1 at high batch.
B. Simulated on the Azure 2023 conversation trace (bundled) across load: no speculation vs
   k = 2, 4 and acceptance 0.6, 0.8 (MTP/EAGLE-style heads, each proposal costing
   --draft-cost x a decode step), chunked prefill, one replica.

    python bench/bench_spec_decode.py [--rate-scales 0.5,1,2,3] [--max-requests 2000] [--draft-cost 0.05]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim.cost import CostModel
from sim.engine.spec_decode import expected_tokens_per_step
from sim.inputs.config import EngineConfig
from sim.inputs.hardware import load_hardware
from sim.inputs.model import load_model
from sim.run.invoke import load_run_workload, run

SETTINGS = [(2, 0.6), (2, 0.8), (4, 0.6), (4, 0.8)]
CONTEXT_TOKENS = 1300


def table(title: str, header: list[str], rows: list[list[str]]) -> None:
    print(f"\n{title}")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print("  ".join(h.rjust(w) for h, w in zip(header, widths)))
    for r in rows:
        print("  ".join(v.rjust(w) for v, w in zip(r, widths)))


def part_a(draft_cost: float, tp: int) -> None:
    cost = CostModel(load_model("llama-3-70b"), load_hardware("h100-sxm"), tp)
    rows = []
    for batch in (1, 4, 16, 32, 64, 128, 256, 512):
        contexts = np.full(batch, CONTEXT_TOKENS, dtype=np.int64)
        plain_s = cost.step_time_s(np.ones(batch, dtype=np.int64), contexts, batch)
        row = [str(batch), f"{plain_s * 1e3:.2f}"]
        for k, a in SETTINGS:
            verify_s = cost.step_time_s(np.full(batch, k + 1, dtype=np.int64), contexts, batch * (k + 1))
            spec_s = verify_s + k * draft_cost * plain_s
            row.append(f"{expected_tokens_per_step([a] * k) * plain_s / spec_s:.2f}")
        rows.append(row)
    table(f"A. speedup per decode step (llama-3-70b, h100-sxm TP{tp}, context {CONTEXT_TOKENS}, heads at "
          f"{draft_cost} of a step per proposal)", ["batch", "plain step ms", *[f"k={k} a={a}" for k, a in SETTINGS]],
          rows)


def part_b(rate_scales: list[float], max_requests: int, draft_cost: float, tp: int) -> None:
    rows = []
    for rate_scale in rate_scales:
        workload = load_run_workload("AzureLLMInferenceTrace_conv", rate_scale=rate_scale, max_requests=max_requests)
        for k, a in [(0, None), *SETTINGS]:
            cfg = EngineConfig(model="llama-3-70b", tp=tp, policy="chunked", spec_tokens=k,
                               spec_acceptance=[a or 0.8], spec_draft_cost=draft_cost)
            s = run(cfg, workload).summary
            spec = s["spec_decoding"]
            rows.append([f"x{rate_scale:g}", "off" if not k else f"k={k} a={a}",
                         f"{s['tpot_s']['p50'] * 1e3:.1f}", f"{s['tpot_s']['p99'] * 1e3:.1f}",
                         f"{s['ttft_s']['p99']:.2f}", f"{s['output_throughput_tok_s']:.0f}",
                         f"{s['kv_utilization_mean']:.2f}", "-" if spec is None else f"{spec['acceptance_rate']:.2f}",
                         f"{s['wall_time_s']:.1f}"])
    table(f"B. Azure conv, first {max_requests} requests, llama-3-70b on 1 x h100-sxm TP{tp}, chunked",
          ["load", "spec", "tpot p50 ms", "tpot p99 ms", "ttft p99 s", "out tok/s", "kv use", "accept", "wall s"],
          rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate-scales", default="0.5,1,2,3")
    parser.add_argument("--max-requests", type=int, default=2000)
    parser.add_argument("--draft-cost", type=float, default=0.05)
    parser.add_argument("--tp", type=int, default=4)
    parser.add_argument("--part", default="AB")
    args = parser.parse_args()
    if "A" in args.part:
        part_a(args.draft_cost, args.tp)
    if "B" in args.part:
        part_b([float(x) for x in args.rate_scales.split(",")], args.max_requests, args.draft_cost, args.tp)


if __name__ == "__main__":
    main()
