"""Disaggregated prefill/decode with wide expert parallelism: DeepSeek-V3 on H100 laid out as SGLang's
large-scale EP deployment, next to plain-TP groups (a table; about a minute of CPU).

The deployment (LMSYS blog 2025-05-05 "Deploying DeepSeek with PD Disaggregation and Large-scale
Expert Parallelism on 96 H100 GPUs"; launch commands in sgl-project/sglang#6017; the same facts as
sim/validate/cases/sglang_large_scale_ep.csv): a prefill server on 4 x 8 H100 (`--tp 32 --dp 32
--enable-dp-attention --ep 32`, DeepEP, two-batch overlap, 16,384 tokens per step) and a decode
server on 9 x 8 H100 (`--tp 72 --dp 72 --enable-dp-attention --ep 72`, DeepEP, two-batch overlap,
256 sequences per GPU), both with 32 redundant experts (288 slots); DeepEP `auto` runs normal
kernels on the prefill server and low-latency ones on the decode server, as SGLang's auto does. The
blog measured each server alone (prefill 54,543 input tok/s per node at 2K prompts; decode 22,282
output tok/s per node at 2K input / 100 output, 256 sequences per GPU); here they run together.

Workload: Poisson arrivals of 2,000-token prompts with 100 output tokens (the blog's decode shape),
`--seconds` of arrivals at `--rate` req/s per 32 prefill GPUs (each layout's prefill GPUs see the same
load; 2P:1D twice the 1P:1D rate). Throughputs are the run's (offered load while it keeps up).
Rows: 1P:1D and 2P:1D of the EP layout, and plain-TP groups on about the same GPUs (prefill 2 x TP16,
decode 4 x TP16: DeepSeek-V3's FP8 weights do not fit TP8 on 80 GB).

    python bench/bench_disagg_ep.py [--rate 60] [--seconds 20]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console
from rich.table import Table

from sim.inputs.config import EngineConfig
from sim.inputs.workload.trace import Trace
from sim.run.invoke import run

PROMPT_TOKENS, OUTPUT_TOKENS = 2000, 100
RATE_PER_GPUS = 32  # --rate is per this many prefill GPUs (one EP32 prefill server)
COMMON = {"model": "deepseek-v3", "hardware": "h100-sxm", "weight_dtype": "fp8", "policy": "chunked"}
EP_GROUPS = {"moe_a2a_backend": "deepep", "ep_num_redundant_experts": 32, "enable_two_batch_overlap": True,
             "prefill": {"tp": 32, "dp": 32, "enable_dp_attention": True, "ep": 32, "max_num_batched_tokens": 16384},
             "decode": {"tp": 72, "dp": 72, "enable_dp_attention": True, "ep": 72, "max_num_seqs": 256}}
TP_GROUPS = {"prefill": {"tp": 16}, "decode": {"tp": 16}}
LAYOUTS = [  # (label, P, D, group knobs)
    ("EP32 DP32 : EP72 DP72, 1P:1D", 1, 1, EP_GROUPS),
    ("EP32 DP32 : EP72 DP72, 2P:1D", 2, 1, EP_GROUPS),
    ("TP16 : TP16, 2P:4D", 2, 4, TP_GROUPS),
]


def fixed_length_poisson(rate_qps: float, seconds: float, seed: int = 0) -> Trace:
    rng = np.random.default_rng(seed)
    n = int(rate_qps * seconds)
    arrivals = np.cumsum(rng.exponential(1.0 / rate_qps, n))
    return Trace(arrivals, np.full(n, PROMPT_TOKENS), np.full(n, OUTPUT_TOKENS), source="fixed 2000/100 Poisson")


def row(label: str, n_prefill: int, n_decode: int, groups: dict, rate_qps: float, seconds: float) -> list[str]:
    cfg = EngineConfig.model_validate({**COMMON, **groups, "prefill_replicas": n_prefill, "decode_replicas": n_decode})
    start_s = time.perf_counter()
    prefill_gpus = n_prefill * (groups["prefill"]["tp"])  # SGLang's tp: the replica's GPUs (DP attention inside)
    s = run(cfg, fixed_length_poisson(rate_qps * prefill_gpus / RATE_PER_GPUS, seconds)).summary
    wall_s = time.perf_counter() - start_s
    d, per_node = s["disaggregation"], 8
    prefill_nodes, decode_nodes = d["prefill_gpus"] / per_node, d["decode_gpus"] / per_node
    blocks = s["num_gpu_blocks_per_replica"]
    decode_blocks = blocks[-1]  # a decode rank's (or replica's) KV blocks
    return [label, str(d["n_gpus"]), f"{d['cost_per_hour_usd']:.0f}", f"{s['n_finished']}/{s['n_requests']}",
            f"{s['input_throughput_tok_s'] / prefill_nodes:,.0f}",
            f"{s['output_throughput_tok_s'] / decode_nodes:,.0f}",
            f"{s['ttft_s']['p50'] * 1e3:.0f} / {s['ttft_s']['p99'] * 1e3:.0f}",
            f"{s['tpot_s']['p50'] * 1e3:.1f} / {s['tpot_s']['p99'] * 1e3:.1f}",
            f"{decode_blocks:,} x {len(blocks) - n_prefill * (d['prefill_layout']['n_kv_ranks'])}",
            f"{(s.get('kv_transfer_s') or {}).get('p99', 0) * 1e3:.1f}", f"{wall_s:.1f}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=60.0, help="req/s per 32 prefill GPUs")
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds of arrivals")
    args = parser.parse_args()
    table = Table(title=f"DeepSeek-V3 FP8 on H100, P:D, {PROMPT_TOKENS}/{OUTPUT_TOKENS} tokens, Poisson {args.rate:g} "
                        f"req/s per 32 prefill GPUs for {args.seconds:g} s")
    for column in ("layout", "GPUs", "$/hour", "finished", "input tok/s per prefill node",
                   "output tok/s per decode node", "TTFT p50 / p99 ms", "TPOT p50 / p99 ms",
                   "decode KV blocks per rank x ranks", "KV transfer p99 ms", "wall s"):
        table.add_column(column)
    for label, n_prefill, n_decode, groups in LAYOUTS:
        table.add_row(*row(label, n_prefill, n_decode, groups, args.rate, args.seconds))
    Console(width=220).print(table)


if __name__ == "__main__":
    main()
