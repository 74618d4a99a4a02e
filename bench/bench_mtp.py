"""MTP speculative decoding on DeepSeek-R1 (FP8, one H200 node, TP 8): TPOT with and without (minutes of CPU).

A. Per decode step from the cost model, every sequence at a CONTEXT_TOKENS context: the plain decode
   step; the MTP step = one batched verify forward of k+1 tokens per sequence + the MTP module's k
   passes (sim/cost/mtp.py); TPOT = step / tokens per step (1 + expected accepted proposals).
B. Simulated: a fixed batch of B requests (`--bench batch=B,isl=ISL,osl=OSL`), mean TPOT over the
   run, no speculation vs MTP k=1 at the given acceptance (drawn per proposal, seeded).

    python bench/bench_mtp.py [--acceptance 0.85] [--batches 1,8,16,32,64] [--engine vllm]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_spec_decode import table  # the same plain table (this folder is on sys.path)

from sim.engine.spec_decode import expected_tokens_per_step, make_spec_decoder
from sim.inputs.config import EngineConfig
from sim.inputs.model import load_model
from sim.inputs.workload.bench import bench_workload
from sim.run.invoke import run
from sim.run.simulate import _replica_parts

CONTEXT_TOKENS = 1500
ISL, OSL = 1000, 200


def config(k: int, acceptance: float, engine: str | None) -> EngineConfig:
    spec = {"spec_tokens": k, "spec_method": "mtp", "spec_acceptance": [acceptance]} if k else {}
    return EngineConfig(model="deepseek-r1", weight_dtype="fp8", hardware="h200", tp=8, engine=engine, **spec)


def part_a(batches: list[int], acceptance: float, engine: str | None) -> None:
    model = load_model("deepseek-r1")
    plain_cfg, mtp_cfg = config(0, acceptance, engine), config(1, acceptance, engine)
    _, cost = _replica_parts(plain_cfg, model, "h200", None)
    spec = make_spec_decoder(mtp_cfg, _replica_parts(mtp_cfg, model, "h200", None)[1], 0)
    per_step = expected_tokens_per_step([acceptance])
    rows = []
    for batch in batches:
        contexts = np.full(batch, CONTEXT_TOKENS, dtype=np.int64)
        plain_s = cost.step_time_s(np.ones(batch, dtype=np.int64), contexts, batch)
        step_s, draft_s = spec.decode_step_time_s(contexts), spec.draft_time_s(contexts)
        rows.append([str(batch), f"{plain_s * 1e3:.2f}", f"{(step_s - draft_s) * 1e3:.2f}", f"{draft_s * 1e3:.2f}",
                     f"{plain_s * 1e3:.2f}", f"{step_s / per_step * 1e3:.2f}", f"{plain_s * per_step / step_s:.2f}"])
    table(f"A. per step, cost model (deepseek-r1 fp8, h200 TP8, context {CONTEXT_TOKENS}, MTP k=1, acceptance "
          f"{acceptance}: {per_step:.2f} tokens/step, engine {engine or 'none'})",
          ["batch", "plain step ms", "verify ms", "draft ms", "TPOT plain ms", "TPOT mtp ms", "speedup"], rows)


def part_b(batches: list[int], acceptance: float, engine: str | None) -> None:
    rows = []
    for batch in batches:
        tpot = {}
        for k in (0, 1):
            summary = run(config(k, acceptance, engine), bench_workload(f"batch={batch},isl={ISL},osl={OSL}")).summary
            tpot[k] = summary["tpot_s"]["mean"]
        rows.append([str(batch), f"{tpot[0] * 1e3:.2f}", f"{tpot[1] * 1e3:.2f}", f"{tpot[0] / tpot[1]:.2f}"])
    table(f"B. simulated fixed batch (isl {ISL}, osl {OSL}), mean TPOT, engine {engine or 'none'}",
          ["batch", "TPOT plain ms", "TPOT mtp ms", "speedup"], rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--acceptance", type=float, default=0.85)
    parser.add_argument("--batches", default="1,8,16,32,64")
    parser.add_argument("--engine", default=None)
    parser.add_argument("--part", default="AB")
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    if "A" in args.part:
        part_a(batches, args.acceptance, args.engine)
    if "B" in args.part:
        part_b(batches, args.acceptance, args.engine)


if __name__ == "__main__":
    main()
