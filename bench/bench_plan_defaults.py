"""Issue 35's must-show plans: `infersim plan` with no dtype, engine or layout flag, on H200, B200
and GB200 NVL72 (GB200 at $10.50/GPU-h, docs/planning.md's sourced price; the profile has none),
20 req/s of 2,048-token prompts and 500-token outputs (Poisson, 1,000 requests), TTFT p99 <= 2 s,
TPOT p99 <= 50 ms, for DeepSeek-R1, gpt-oss-120b and Qwen3-235B-A22B-FP8.

    python bench/bench_plan_defaults.py [--models deepseek-r1,gpt-oss-120b,qwen3-235b-a22b-fp8]

Each plan runs as its own `python -m sim plan ... --json` process (the command a user types), so the
timing row has its wall seconds and the CPU seconds of it and its workers, and the load average
around it (the machine may be shared: the wall time depends on it, the plan does not). The table
shows the weights the plan sized, the layouts searched, what the screen dropped, the recommendation
and each hardware's cheapest verified plain-TP cluster (the plan must not be dearer: checked).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

WORKLOAD = """synthetic:
  arrival: {kind: poisson, rate_qps: 20.0}
  lengths: {prompt: {kind: fixed, value: 2048}, output: {kind: fixed, value: 500}}
  n_requests: 1000
seed: 0
"""
FLAGS = ["--hardware", "h200,b200,gb200-nvl72", "--price", "gb200-nvl72=10.50", "--target-qps", "20",
         "--slo", "ttft_p99=2s", "--slo", "tpot_p99=50ms", "--json"]
MODELS = "deepseek-r1,gpt-oss-120b,qwen3-235b-a22b-fp8"


def run_plan(model: str, workload: Path) -> tuple[dict, float, float, tuple[float, float]]:
    """(plan.json, wall s, CPU s of the process and its children, load average before / after)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load_before = os.getloadavg()[0]
    start_s = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "sim", "plan", "--workload", str(workload), "--model", model,
                           *FLAGS], capture_output=True, text=True, check=True)
    wall_s = time.perf_counter() - start_s
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(done.stdout), wall_s, cpu_s, (load_before, os.getloadavg()[0])


def cheapest_plain_tp(plan: dict) -> dict | None:
    rows = [r for r in plan["candidates"] if r.get("verified") and r["layout"]["ep"] == 1
            and r["layout"]["attention_dp"] == 1 and r["layout"]["pp"] == 1]
    return min(rows, key=lambda r: r["cost_per_hour_usd"], default=None)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default=MODELS)
    args = parser.parse_args()
    table = Table(title="plan with no dtype / engine / layout flag (issue 35 must-show)")
    for column in ("model", "weights", "engine", "layouts", "screened / dropped", "recommended", "$/h",
                   "cheapest verified plain TP", "wall s", "CPU s", "load before / after"):
        table.add_column(column)
    with tempfile.TemporaryDirectory() as tmp:
        workload = Path(tmp) / "synthetic_2k_500.yaml"
        workload.write_text(WORKLOAD)
        for model in args.models.split(","):
            plan, wall_s, cpu_s, load = run_plan(model, workload)
            best, plain = plan["recommended"], cheapest_plain_tp(plan)
            assert plain is None or best["cost_per_hour_usd"] <= plain["cost_per_hour_usd"] + 1e-9, model
            layouts = plan["layouts"]
            table.add_row(
                model, plan["weight_dtype"]["described"], plan["config"]["engine"] or "none",
                "plain TP" if layouts is None else f"EP {layouts['expert_parallel']}, DP {layouts['dp']}",
                "-" if plan["screen"] is None else f"{plan['screen']['n_screened']} / {plan['screen']['n_dropped']}",
                f"{best['replicas']} x {best['hardware']} {best['layout']['label']} {best['policy']}",
                f"{best['cost_per_hour_usd']:.2f}",
                "-" if plain is None else f"{plain['replicas']} x {plain['hardware']} {plain['layout']['label']}: "
                                          f"${plain['cost_per_hour_usd']:.2f}",
                f"{wall_s:.1f}", f"{cpu_s:.1f}", f"{load[0]:.1f} / {load[1]:.1f}")
    Console(width=220).print(table)


if __name__ == "__main__":
    main()
