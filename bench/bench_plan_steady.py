"""Issue 45's must-show: do a plan's listed capacities hold on a run five times longer?

For each model, `infersim plan` on the docs' workload (1,000 requests of 2,048 in / 500 out, Poisson at
20 req/s; H200, B200 and GB200 NVL72 at $10.50/GPU-h; TTFT p99 <= 2 s, TPOT p99 <= 50 ms), then every
listed candidate replica is replayed on its own at its listed `max_qps_per_replica` on 5,000 requests
of the same workload (the same spec, a longer draw), and the recommended cluster at the target rate on
the same 5,000. A capacity holds when the SLOs are met and the queue does not grow (summary.json's
`overload`). Prints one table per model and writes the rows as JSON.

    python bench/bench_plan_steady.py [--models gpt-oss-120b,deepseek-r1,...] [--out runs/bench_plan_steady]

Each plan and each replay runs as the command a user types (`python -m sim ... --json`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from sim.inputs.config import EngineConfig
from sim.inputs.slo import slo_report
from sim.inputs.workload import load_workload
from sim.inputs.workload.transforms import scale_rate
from sim.planner.slo import parse_slo
from sim.run.load_check import queue_growth
from sim.run.simulate import simulate
from sim.run.summary import requests_columns

SLOS = ["ttft_p99=2s", "tpot_p99=50ms"]
FLAGS = ["--hardware", "h200,b200,gb200-nvl72", "--price", "gb200-nvl72=10.50", "--target-qps", "20",
         *[f for s in SLOS for f in ("--slo", s)], "--json"]
MODELS = "gpt-oss-120b,deepseek-r1,qwen3-235b-a22b-fp8,llama-3.1-405b"


def workload_yaml(n_requests: int) -> str:
    return ("synthetic:\n  arrival: {kind: poisson, rate_qps: 20.0}\n"
            "  lengths: {prompt: {kind: fixed, value: 2048}, output: {kind: fixed, value: 500}}\n"
            f"  n_requests: {n_requests}\nseed: 0\n")


def replay(cfg: dict, trace, rate_qps: float, replicas: int = 1) -> dict:
    """One replay of `trace` at `rate_qps` on `replicas` replicas of `cfg`: the SLO verdict and the queue."""
    cluster = EngineConfig.model_validate({**cfg, "replicas": replicas, "latency_attribution": False})
    table = requests_columns(simulate(cluster, scale_rate(trace, target_qps=rate_qps)))
    duration_s = float(max(table["finish_s"][table["status"] == "FINISHED"].max(), 1e-9))
    report = slo_report(table, parse_slo(SLOS), duration_s)
    load = queue_growth(table)
    return {"met": report["met"], "overloaded": load["overloaded"], "served_qps": load["served_qps"],
            "p99_ms": {k: v["value_ms"] for k, v in report["per_slo"].items()}}


def run_plan(model: str, folder: Path) -> tuple[dict, float]:
    folder.mkdir(parents=True, exist_ok=True)
    spec = folder / "w1000.yaml"
    spec.write_text(workload_yaml(1000))
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "sim", "plan", "--workload", str(spec), "--model", model, *FLAGS,
                           "--out", str(folder / "plan")], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"plan {model} failed: {done.stderr.strip()[-400:]}")
    return json.loads((folder / "plan" / "plan.json").read_text()), time.perf_counter() - start


def check_model(model: str, folder: Path, console: Console) -> list[dict]:
    plan, wall_s = run_plan(model, folder)
    spec5 = folder / "w5000.yaml"
    spec5.write_text(workload_yaml(5000))
    longer = load_workload(str(spec5))
    rows = []
    for row in plan["candidates"]:
        held = replay(row["engine_config"], longer, row["max_qps_per_replica"])
        rows.append({"model": model, "what": f"{row['hardware']} {row['layout']['label']} {row['policy']}",
                     "listed_qps": row["max_qps_per_replica"], "verified": row.get("verified"),
                     "replicas": row["replicas"], **held})
    rec = plan.get("recommended")
    if rec:
        held = replay(rec["engine_config"], longer, plan["target_qps"], rec["replicas"])
        rows.append({"model": model, "what": f"RECOMMENDED {rec['replicas']} x {rec['hardware']} "
                     f"{rec['layout']['label']}", "listed_qps": plan["target_qps"], "verified": rec.get("verified"),
                     "replicas": rec["replicas"], **held})
    table = Table(title=f"{model}: plan {wall_s:.0f} s wall; each listed rate on 5,000 requests")
    for column in ("candidate", "listed req/s", "verified", "TTFT p99 ms", "TPOT p99 ms", "served req/s", "holds"):
        table.add_column(column)
    for r in rows:
        p99 = r["p99_ms"]
        table.add_row(r["what"], f"{r['listed_qps']:.3g}", str(r["verified"]), _ms(p99.get("ttft_p99")),
                      _ms(p99.get("tpot_p99")), f"{r['served_qps'] or 0:.3g}",
                      "yes" if r["met"] and not r["overloaded"] else "NO")
    console.print(table)
    return rows


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=MODELS)
    parser.add_argument("--out", default="runs/bench_plan_steady")
    args = parser.parse_args()
    console = Console(width=160)
    out = Path(args.out)
    rows = [r for model in args.models.split(",") for r in check_model(model, out / model, console)]
    (out / "rows.json").write_text(json.dumps(rows, indent=1))
    bad = [r for r in rows if not (r["met"] and not r["overloaded"])]
    console.print(f"{len(rows) - len(bad)} of {len(rows)} listed rates hold on 5,000 requests")


if __name__ == "__main__":
    main()
