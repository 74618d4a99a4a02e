"""Planner speed and the issue's reference plan: Llama-3-70B on the bundled Azure conversation trace
(splitwise_conv) at 20 req/s, ttft_p99 <= 2 s and tpot_p99 <= 0.1 s, over 3 hardware x 4 TP x 2 policies.

    python bench/bench_plan.py [--workers 1,2] [--max-requests 1000] [--target-qps 20] [--sizing busiest]
    python bench/bench_plan.py --case deepseek   # the layout row only (bench/plan_layouts_case.py)

Prints the plan (every candidate, verified or not), the verification runs of the whole trace
(P99s and SLO attainment per run), and a timing table: wall time per worker count, candidates
searched, slice simulations and whole-trace runs. The plan must be identical for every worker count
(checked).

The `deepseek` case (bench/plan_layouts_case.py): DeepSeek-R1 on H200 and GB200 NVL72 over TP x PP x EP x
DP-attention layouts and P:D ratios, its stated workload and SLOs there; it prints the screen, the sized
candidates with every whole-trace run, the P:D comparison, the recommendation's whole-trace numbers, its
vLLM and SGLang lines, and a timing row with wall and CPU seconds (the plan's own process and workers).
"""

from __future__ import annotations

import argparse
import os
import time

import plan_layouts_case  # bench/ is on sys.path when this script runs
from rich.console import Console
from rich.table import Table

from sim.inputs.config import EngineConfig
from sim.inputs.workload import load_workload
from sim.planner.plan import SearchSettings, make_plan
from sim.planner.slo import parse_slo

HARDWARE = ["h100-sxm", "a100-80g-sxm", "h200"]
TPS = [1, 2, 4, 8]
POLICIES = ["chunked", "radix"]
SLO = ["ttft_p99=2s", "tpot_p99=0.1s"]


def timed_plan(trace, workers: int, max_requests: int, target_qps: float, sizing: str) -> tuple[dict, float]:
    start_s = time.perf_counter()
    plan = make_plan(trace, EngineConfig(model="llama-3-70b"), HARDWARE, TPS, POLICIES, parse_slo(SLO), target_qps,
                     SearchSettings(max_requests=max_requests, sizing=sizing), workers)
    return plan, time.perf_counter() - start_s


def verification_table(plan: dict) -> Table:
    table = Table(title=f"whole-trace verification runs ({plan['workload_shape']['n_requests']} requests at "
                        f"{plan['target_qps']:g} req/s through every replica, router "
                        f"{plan['config']['router']})")
    for column in ("candidate", "replicas", "GPUs", "P99 TTFT ms", "P99 TPOT ms", "P99 E2E ms",
                   *[f"{k} attained" for k in plan["slo"]["limits_s"]], "within all SLOs", "passes",
                   "stopped early at (sim s)"):
        table.add_column(column)
    for row in plan["candidates"]:
        for run in row.get("verification", []):
            table.add_row(f"{row['hardware']} tp{row['tp']} {row['policy']}", str(run["replicas"]), str(run["gpus"]),
                          *[f"{run['p99_ms'][m]:.0f}" for m in ("ttft", "tpot", "e2e")],
                          *[f"{a:.1%}" for a in run["attainment"].values()], f"{run['within_all_slos']:.1%}",
                          str(run["passes"]),
                          "-" if not run.get("stopped_early") else f"{run['stopped_early']['at_s']:.0f}")
    return table


def plan_table(plan: dict) -> Table:
    table = Table(title=f"llama-3-70b on splitwise_conv, target {plan['target_qps']:g} req/s, {', '.join(SLO)}")
    for column in ("hardware", "tp", "policy", "max req/s/replica", "replicas (est.)", "GPUs", "$/hour",
                   "$/M out tok", "sims", "verified", "binding (just above the limit)"):
        table.add_column(column)
    for row in plan["candidates"]:
        verified = {True: "yes", False: "FAILS"}.get(row.get("verified"), "not run")
        table.add_row(row["hardware"], str(row["tp"]), row["policy"], f"{row['max_qps_per_replica']:.3f}",
                      f"{row['replicas']} ({row.get('replicas_estimated', row['replicas'])})", str(row["gpus"]),
                      f"{row['cost_per_hour_usd']:.2f}", f"{row['usd_per_m_output_tokens']:.3f}",
                      str(len(row["search_points"])), verified, row["binding_detail"])
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="2", help="comma-separated worker counts to time")
    parser.add_argument("--max-requests", type=int, default=1000)
    parser.add_argument("--target-qps", type=float, default=20.0)
    parser.add_argument("--sizing", default="busiest", choices=("busiest", "head"))
    parser.add_argument("--case", default="all", choices=("all", "llama", "deepseek"),
                        help="llama: Llama-3-70B over hardware x TP x policy; deepseek: the layout row")
    args = parser.parse_args()
    console = Console(width=200)
    if args.case in ("all", "llama"):
        llama_case(args, console)
    if args.case in ("all", "deepseek"):
        deepseek_case(args, console)


def deepseek_case(args, console: Console) -> None:
    workers = int(args.workers.split(",")[0])
    plan, wall_s, cpu_s = plan_layouts_case.run(workers, 500)
    for table in plan_layouts_case.tables(plan):
        console.print(table)
    for line in plan_layouts_case.summary_lines(plan):
        console.print(line, soft_wrap=True)
    n_sims = sum(len(r["search_points"]) for r in plan["candidates"] + plan["infeasible"])
    n_whole = sum(len(r.get("verification", [])) + r.get("verification_runs_unused", 0) for r in plan["candidates"])
    n_split = sum(len(s["runs"]) for s in (plan["disaggregated"] or {}).get("splits", []))
    timing = Table(title=f"plan wall and CPU time, layout row ({os.cpu_count()} CPUs, shared; 500 requests per slice "
                         f"simulation; CPU: this process and its workers)")
    for column in ("case", "workers", "wall s", "CPU s", "candidates (priced / sized / skipped)", "slice simulations",
                   "whole-trace runs (aggregated + P:D)"):
        timing.add_column(column, justify="right")
    timing.add_row("deepseek-r1 h200+gb200 layouts x P:D", str(workers), f"{wall_s:.1f}", f"{cpu_s:.1f}",
                   f"{plan['screen']['n_screened']} / {plan['screen']['n_sized']} / {len(plan['skipped'])}",
                   str(n_sims), f"{n_whole} + {n_split}")
    console.print(timing)


def llama_case(args, console: Console) -> None:
    trace = load_workload("splitwise_conv")
    timings, plans = [], []
    for workers in [int(w) for w in args.workers.split(",")]:
        plan, wall_s = timed_plan(trace, workers, args.max_requests, args.target_qps, args.sizing)
        n_sims = sum(len(r["search_points"]) for r in plan["candidates"] + plan["infeasible"])
        n_whole = sum(len(r.get("verification", [])) + r.get("verification_runs_unused", 0) for r in plan["candidates"])
        timings.append((workers, wall_s, len(plan["candidates"]) + len(plan["infeasible"]), len(plan["skipped"]),
                        n_sims, n_whole))
        plans.append(plan)
    console.print(plan_table(plans[0]))
    console.print(verification_table(plans[0]))
    best = plans[0]["recommended"]
    shape = plans[0]["workload_shape"]
    console.print(f"workload: {shape['n_requests']} requests, mean {shape['mean_qps']:.2f} req/s; peak-to-mean "
                  f"{shape['slice']['peak_to_mean']:.2f} over the sizing slice ({shape['slice']['sizing']}, "
                  f"{shape['slice']['n_requests']} requests), {shape['peak_to_mean_60s_at_target']:.2f} over 1-min "
                  f"windows at the target")
    if best is None:
        console.print("NO recommendation: no verified cluster met the SLOs on the whole trace")
    else:
        run = best["verified_run"]
        console.print(f"recommended: {best['replicas']} x {best['hardware']} tp{best['tp']} {best['policy']} = "
                      f"{best['gpus']} GPUs, ${best['cost_per_hour_usd']:.2f}/hour; on the whole trace: P99 TTFT "
                      f"{run['p99_ms']['ttft']:.0f} ms, P99 TPOT {run['p99_ms']['tpot']:.1f} ms, "
                      f"{run['within_all_slos']:.1%} of requests within all SLOs, meets the SLOs: {run['passes']}")
        console.print(f"launch ({plans[0]['launch']['label']}): {plans[0]['launch']['command']}")
    for row in plans[0]["skipped"][::len(POLICIES)]:
        console.print(f"skipped: {row['hardware']} tp{row['tp']}: {row['reason']}")
    timing = Table(title=f"plan wall time ({os.cpu_count()} CPUs, {args.max_requests} requests per simulation)")
    for column in ("workers", "wall s", "candidates searched", "skipped", "slice simulations",
                   "whole-trace runs (incl. unused speculative)", "same plan"):
        timing.add_column(column, justify="right")
    for (workers, wall_s, n_cand, n_skip, n_sims, n_whole), plan in zip(timings, plans, strict=True):
        timing.add_row(str(workers), f"{wall_s:.1f}", str(n_cand), str(n_skip), str(n_sims), str(n_whole),
                       str(plan == plans[0]))
    console.print(timing)


if __name__ == "__main__":
    main()
