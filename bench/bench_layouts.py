"""Llama-3.1-405B on two 8-GPU H100 nodes: TP16 across the nodes against TP8 x PP2.

Prints one row per layout: a prefill step (4096 tokens), a decode step (64 sequences at context
2048) with their cross-node ops, KV blocks, and a short simulated run's throughput and latency.

    PYTHONPATH=$PWD python bench/bench_layouts.py
"""

from __future__ import annotations

import time

import numpy as np

from sim.cost.replica import replica_cost_model
from sim.inputs.config import load_config
from sim.inputs.hardware import load_hardware
from sim.inputs.layout.layout_memory import plan_layout_memory
from sim.inputs.layout.parallel import ReplicaLayout
from sim.inputs.model import load_model
from sim.run.invoke import load_run_workload, run

MODEL, HARDWARE = "llama-3.1-405b", "h100-sxm"
LAYOUTS = (("TP16 across nodes", 16, 1), ("TP8 x PP2", 8, 2))


def _ops_ms(cost, q, c) -> tuple[float, dict[str, float]]:
    step = cost.breakdown(q, c)
    ops = {op.name: op.time_s * (step.n_layers if op.per_layer else 1) * 1e3 for op in step.ops}
    return step.time_s * 1e3, ops


def main() -> None:
    model, hw = load_model(MODEL), load_hardware(HARDWARE)
    header = ("layout", "prefill_ms", "  cross-node", "bubble", "decode64_ms", "  cross-node", "kv_blocks",
              "out_tok_s", "tpot_p50_ms", "ttft_p50_ms", "wall_s")
    print(" | ".join(header))
    for label, tp, pp in LAYOUTS:
        cost = replica_cost_model(model, hw, tp, pp=pp)
        prefill_ms, prefill_ops = _ops_ms(cost, [4096], [0])
        decode_ms, decode_ops = _ops_ms(cost, np.ones(64, dtype=np.int64), np.full(64, 2048))
        cross = "allreduce_scale_out" if pp == 1 else "pp_send_recv"
        blocks = plan_layout_memory(model, hw, ReplicaLayout(tp=tp, pp=pp)).num_gpu_blocks
        cfg = load_config(None, {"model": MODEL, "hardware": HARDWARE, "tp": tp, "pp": pp, "policy": "chunked"})
        workload = load_run_workload("splitwise_conv", None, None, 400, cfg.seed, 1.5)
        start = time.perf_counter()
        summary = run(cfg, workload, None).summary
        wall_s = time.perf_counter() - start
        print(" | ".join(str(v) for v in (
            label, f"{prefill_ms:.1f}", f"{prefill_ops.get(cross, 0.0):.1f}",
            f"{prefill_ops.get('pp_bubble', 0.0):.1f}",
            f"{decode_ms:.2f}", f"{decode_ops.get(cross, 0.0):.2f}", blocks,
            f"{summary['output_throughput_tok_s']:.0f}", f"{summary['tpot_s']['p50'] * 1e3:.1f}",
            f"{summary['ttft_s']['p50'] * 1e3:.0f}", f"{wall_s:.1f}")))


if __name__ == "__main__":
    main()
