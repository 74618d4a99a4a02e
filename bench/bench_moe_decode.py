"""MoE decode steps by batch size: the active-expert memory term and where the step turns compute-bound.

For each model, every sequence decodes one token over a `--context`-token cache. Per batch B:
experts a layer touches, n * (1 - (1 - k/n)^B) (sim/cost/moe.py); the expert weight bytes one GPU
reads per step (all MoE layers, the checkpoint's dtypes); the routed-experts op's time and bound;
the whole step's time, its bound (the bound of most of its time) and output tok/s. A last row
gives the smallest batch (powers of two up to 65,536) whose expert op is compute-bound.

    python bench/bench_moe_decode.py [--context 2048] [--batches 1,2,4,...,256]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim.cost import CostModel
from sim.cost.moe import experts_touched
from sim.inputs.hardware import load_hardware
from sim.inputs.model import load_model

CASES = (("deepseek-v3", "h200", 8), ("qwen3-30b-a3b", "h100-sxm", 1))


def step_row(cost: CostModel, batch: int, context: int) -> dict:
    m = cost.model
    step = cost.breakdown([1] * batch, [context] * batch)
    moe = next(op for op in step.ops if op.name == "moe_mlp")
    expert_el = m.expert_params // cost.tp
    touched = float(experts_touched(np.array([batch]), m.n_experts, m.n_active_experts)[0])
    g = cost.group_gemm["experts"] if cost.group_gemm else None
    bytes_el = g.bytes_el if g else cost.weight_bytes_el
    return {
        "batch": batch, "experts_touched": touched,
        "expert_gb": touched * expert_el * bytes_el * m.n_moe_layers / 1e9,
        "moe_ms": moe.time_s * m.n_layers * 1e3, "moe_bound": moe.bound,
        "step_ms": step.time_s * 1e3, "step_bound": step.bound,
        "tok_s": batch / step.time_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--context", type=int, default=2048)
    parser.add_argument("--batches", default="1,2,4,8,16,32,64,128,256")
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    for name, hw, tp in CASES:
        model = load_model(name)
        cost = CostModel(model, load_hardware(hw), tp, weight_dtype="auto")
        print(f"\n{name} on {tp} x {hw} (weights as the checkpoint stores them), context {args.context}: "
              f"{model.n_experts} experts top-{model.n_active_experts}, {model.n_moe_layers} MoE layers")
        print(f"{'batch':>6} {'experts/layer':>13} {'expert GB read':>14} {'experts ms':>10} {'bound':>8} "
              f"{'step ms':>8} {'step bound':>10} {'tok/s':>9}")
        for b in batches:
            r = step_row(cost, b, args.context)
            print(f"{r['batch']:>6} {r['experts_touched']:>13.1f} {r['expert_gb']:>14.2f} {r['moe_ms']:>10.3f} "
                  f"{r['moe_bound']:>8} {r['step_ms']:>8.3f} {r['step_bound']:>10} {r['tok_s']:>9.0f}")
        crossover = next((b for b in (2 ** i for i in range(17)) if step_row(cost, b, args.context)["moe_bound"]
                          == "compute"), None)
        print(f"experts turn compute-bound at batch {crossover} (first power of two)" if crossover else
              "experts stay memory-bound up to batch 65,536")


if __name__ == "__main__":
    main()
