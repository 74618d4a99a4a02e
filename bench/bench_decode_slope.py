"""Decode step time vs batch: the cost model against what the real vLLM V1 serving runs measured
(split=fit rows only), and the KV-read bandwidth those runs imply.

Each measured load stage gives one point (N, t): N = rate x mean E2E running requests (Little's
law) and t = the per-token time (E2E - TTFT) / (max_tokens - 1), i.e. the mean step time at about
that batch (every running request gains one token per step). Two stages of one run share prompts
and lengths, so their difference isolates what one more running sequence costs per step:

    slope = (t_1 - t_0) / (N_1 - N_0)    [seconds per step per running sequence]

For a dense model that is its KV read (context x KV bytes per token / (bandwidth x e_kv)) plus the
small per-token work of the other ops; the model's own per-sequence cost of those other ops is
subtracted (from `CostModel.breakdown`) to give the implied e_kv. Then the table: predicted decode
step time (engine CPU overlapped, as vLLM V1's async scheduler runs it) at batch 1..256 for one dense
and one MoE model, with the measured points beside it.

    python bench/bench_decode_slope.py
"""

from __future__ import annotations

import numpy as np

from sim.cost import CostModel
from sim.inputs.config import EngineConfig
from sim.inputs.hardware import load_hardware
from sim.inputs.model import load_model
from sim.run.simulate import _replica_parts
from sim.validate.cases import load_cases
from sim.validate.staged import parse_staged

CASES = "sim/validate/cases/vllm_v1_serving_h100.csv"
BATCHES = (1, 8, 16, 32, 64, 96, 128, 192, 256)


def measured_points(split: str = "fit") -> dict[str, list[tuple[float, float, float]]]:
    """run -> [(N running, step time s, mean context tokens)] per stage, from the `split` rows."""
    cases = [c for c in load_cases([__import__("pathlib").Path(CASES)]) if c.split == split
             and c.workload_args.get("measured") != "overloaded"]
    by_stage: dict[tuple, dict] = {}
    for case in cases:
        run = case.case_id.split(":")[0]
        staged, stage = parse_staged(case.case_id, case.workload_args)
        key = (run, stage, case.model, case.tp)
        by_stage.setdefault(key, {"rate": staged.rates_rps[stage], "staged": staged})[case.metric] = case.value
    points: dict[str, list] = {}
    for (run, _stage, model, tp), row in sorted(by_stage.items()):
        staged = row["staged"]
        e2e_s, ttft_s = row["mean_e2e_latency_ms"] / 1e3, row["mean_ttft_ms"] / 1e3
        step_s = (e2e_s - ttft_s) / (staged.output_tokens - 1)
        prompt = float(np.mean([t for _, t in staged.prompt_quantiles]))
        context = prompt + staged.output_tokens / 2
        points.setdefault(f"{run}|{model}|{tp}", []).append((row["rate"] * e2e_s, step_s, context))
    return points


def implied_kv_efficiency(model_name: str, tp: int, points, hw_name: str = "h100-sxm") -> tuple[float, float] | None:
    """(slope s per sequence, implied KV bandwidth share) from a run's two stages, or None."""
    if len(points) < 2:
        return None
    (n0, t0, c0), (n1, t1, c1) = points[0], points[-1]
    if n1 <= n0:
        return None
    slope = (t1 - t0) / (n1 - n0)
    model, hw = load_model(model_name), load_hardware(hw_name)
    cost = CostModel(model, hw, tp, step_overhead_s=0.0)
    context = int(round((c0 + c1) / 2))

    def other_ops_s(n):  # everything but decode attention, per step, at n sequences
        step = cost.breakdown(np.ones(n, dtype=np.int64), np.full(n, context))
        return step.time_s - sum(op.time_s * step.n_layers for op in step.ops if op.name == "decode_attention")

    other_per_seq = (other_ops_s(int(n1)) - other_ops_s(max(int(n0), 1))) / (int(n1) - max(int(n0), 1))
    kv_bytes = context * cost.kv_bytes_per_token_layer_gpu * model.n_layers
    kv_s = slope - other_per_seq
    return slope, kv_bytes / (kv_s * hw.hbm_bandwidth_bytes_s) if kv_s > 0 else float("inf")


def step_table(model: str, tp: int, context: int, engine: str = "vllm") -> list[float]:
    cfg = EngineConfig.model_validate(dict(engine=engine, model=model, hardware="h100-sxm", tp=tp, max_num_seqs=256))
    _, cost = _replica_parts(cfg, load_model(model), "h100-sxm", None)
    return [cost.step_time_s(np.ones(b, dtype=np.int64), np.full(b, context), b) for b in BATCHES]


def main() -> None:
    points = measured_points("fit")
    print("## KV-read bandwidth implied by the fit half (two load stages of one run)")
    print(f"{'run':<34} {'N0':>6} {'t0 ms':>7} {'N1':>6} {'t1 ms':>7} {'slope us/seq':>13} {'implied e_kv':>13}")
    for key, pts in points.items():
        run, model, tp = key.split("|")
        got = implied_kv_efficiency(model, int(tp), pts)
        if got is None:
            continue
        (n0, t0, _), (n1, t1, _) = pts[0], pts[-1]
        print(f"{run:<34} {n0:6.1f} {t0 * 1e3:7.2f} {n1:6.1f} {t1 * 1e3:7.2f} {got[0] * 1e6:13.1f} {got[1]:13.3f}")
    hw = load_hardware("h100-sxm")
    print(f"profile h100-sxm: memory {hw.efficiency.memory}, paged_attention_memory[16] "
          f"{hw.efficiency.paged_efficiency(16):.3f}")
    print("\n## decode step time (ms) vs batch, vllm preset (CPU overlapped), context ~700 tokens")
    print(f"{'model':<22} " + " ".join(f"{b:>7}" for b in BATCHES) + "   measured (N, ms) on the fit half")
    for model, tp in (("llama-2-7b", 1), ("codellama-34b", 2), ("llama-2-70b", 4), ("mixtral-8x7b", 2)):
        times = step_table(model, tp, 700)
        meas = [f"({n:.0f}, {t * 1e3:.2f})" for key, pts in points.items() if key.split("|")[1] == model
                for n, t, _ in pts]
        print(f"{model + ' tp' + str(tp):<22} " + " ".join(f"{t * 1e3:7.2f}" for t in times) + "   " + " ".join(meas))


if __name__ == "__main__":
    main()
