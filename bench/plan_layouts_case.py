"""bench_plan.py's layout row (issue 24): DeepSeek-R1 on H200 and GB200 NVL72 over TP x PP x EP x
DP-attention layouts and P:D ratios, screened, sized, verified on the whole stated workload.

Workload: the bundled Azure conversation trace (splitwise_conv), its first 4,000 requests, re-timed
to a mean of 20 req/s with its bursts kept: that is the "whole trace" every verification replays.
SLOs: ttft_p99 <= 2 s, tpot_p99 <= 50 ms. Weights fp8 (DeepSeek-R1 ships FP8 weights; every tensor
priced at fp8). GB200 price: $10.50 per GPU-hour, a judgement from the $42.00/hour on-demand listing
of a GB200 NVL72 instance on gpu.blog/gpus/nvidia-gb200-nvl72 (looked up 2026-12-01) over the 4 GPUs
of CoreWeave's gb200-4x instance (docs.coreweave.com/docs/platform/instances/gb200); the profile has
no price. H200: the profile's $3.59.
"""

from __future__ import annotations

import resource
import time

import numpy as np
from rich.table import Table

from sim.inputs.config import EngineConfig
from sim.inputs.workload import load_workload
from sim.planner.layouts import LayoutGrid
from sim.planner.plan import SearchSettings, make_plan
from sim.planner.slo import parse_slo

N_REQUESTS = 4000
TARGET_QPS = 20.0
SLO = ["ttft_p99=2s", "tpot_p99=50ms"]
HARDWARE = ["h200", "gb200-nvl72"]
PRICES = {"gb200-nvl72": 10.50}  # see the module docstring for the source
TPS = [1, 2, 4, 8, 16]
GRID = LayoutGrid(pps=(1, 2), expert_parallel=(False, True), dps=(1, 2, 4, 8), a2a_backends=("nccl", "deepep"))
PD_RATIOS = [(1, 1), (1, 2), (2, 1)]
SCREEN_KEEP = 3
SHOWN_PER_HARDWARE = 8  # screen rows printed per hardware (plan.json has them all)
BASE = EngineConfig(model="deepseek-r1", weight_dtype="fp8", policy="chunked")


def _cpu_s() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run(workers: int, max_requests: int) -> tuple[dict, float, float]:
    """(plan, wall s, CPU s of this process and its finished workers)."""
    trace = load_workload("splitwise_conv").take(np.arange(N_REQUESTS))
    settings = SearchSettings(max_requests=max_requests, screen_keep=SCREEN_KEEP)
    cpu_start_s, start_s = _cpu_s(), time.perf_counter()
    plan = make_plan(trace, BASE, HARDWARE, TPS, ["chunked"], parse_slo(SLO), TARGET_QPS, settings, workers,
                     prices=PRICES, layouts=GRID, pd_ratios=PD_RATIOS)
    return plan, time.perf_counter() - start_s, _cpu_s() - cpu_start_s


def tables(plan: dict) -> list:
    """The screen, the sized candidates with their whole-trace runs, and the P:D comparison."""
    screen = Table(title=f"screen ({plan['screen']['kind']}): {plan['screen']['n_screened']} candidates priced, "
                         f"{plan['screen']['n_sized']} sized ({SCREEN_KEEP} per hardware), "
                         f"{len(plan['skipped'])} skipped (cannot run)")
    for column in ("candidate", "est. decode batch", "est. req/s/replica", "est. replicas", "est. $/hour", "sized"):
        screen.add_column(column)
    rows = sorted(plan["screen"]["estimates"], key=lambda r: (r["hardware"], r["cost_per_hour_usd"]))
    for row in [r for hw in HARDWARE for r in [x for x in rows if x["hardware"] == hw][:SHOWN_PER_HARDWARE]]:
        screen.add_row(row["candidate"], str(row["decode_batch"]), f"{row['replica_qps']:.2f}", f"{row['replicas']:g}",
                       f"{row['cost_per_hour_usd']:.1f}", "yes" if row["sized"] else "-")
    sized = Table(title=f"sized and verified on the whole workload ({N_REQUESTS} requests at {TARGET_QPS:g} req/s)")
    for column in ("hardware", "layout", "req/s/replica (slice)", "replicas", "GPUs", "nodes", "$/hour",
                   "whole-node $/hour", "verified", "runs (replicas: P99 TTFT / TPOT ms, passes)"):
        sized.add_column(column)
    for row in plan["candidates"]:
        runs = "; ".join(f"{r['replicas']}: {r['p99_ms']['ttft']:.0f} / {r['p99_ms']['tpot']:.1f}, {r['passes']}"
                         for r in row.get("verification", []))
        sized.add_row(row["hardware"], row["layout"]["label"], f"{row['max_qps_per_replica']:.2f}",
                      str(row["replicas"]), str(row["gpus"]), str(row["nodes"]), f"{row['cost_per_hour_usd']:.2f}",
                      f"{row['whole_node_cost_per_hour_usd']:.2f}",
                      {True: "yes", False: "FAILS"}.get(row.get("verified"), "not run"), runs or "-")
    return [screen, sized, _disagg_table(plan["disaggregated"])]


def _disagg_table(section: dict) -> Table:
    if not section["compared"]:
        return Table(title=f"disaggregated: not compared: {section['reason']}")
    groups = section["groups"]
    disagg = Table(title=f"P:D on {section['hardware']}: prefill group {groups['prefill']['candidate']}, decode group "
                         f"{groups['decode']['candidate']} (chosen apart: {groups['rule']})")
    for column in ("layout", "replicas", "GPUs", "$/hour", "P99 TTFT ms", "P99 TPOT ms", "within all SLOs", "passes"):
        disagg.add_column(column)
    for row in [section["aggregated"], *section["splits"]]:
        replicas = (str(row["replicas"]) if row["ratio"] == "aggregated" else
                    f"{row['prefill_replicas']}P + {row['decode_replicas']}D")
        disagg.add_row(row["ratio"], replicas, str(row["gpus"]), f"{row['cost_per_hour_usd']:.2f}",
                       f"{row['p99_ms']['ttft']:.0f}", f"{row['p99_ms']['tpot']:.1f}", f"{row['within_all_slos']:.1%}",
                       str(row["passes"]))
    return disagg


def summary_lines(plan: dict) -> list[str]:
    """The recommendation with its whole-trace numbers, its launch lines, and what the plan proved."""
    best = plan["recommended"]
    if best is None:
        return ["NO recommendation: no verified cluster met the SLOs on the whole workload"]
    run, order = best["verified_run"], plan["verification_order"]
    lines = [f"recommended: {best['replicas']} x {best['hardware']} {best['layout']['label']} = {best['gpus']} GPUs on "
             f"{best['nodes']} nodes, ${best['cost_per_hour_usd']:.2f}/hour; verified on the whole workload "
             f"({run['n_requests']} requests, {run['sim_duration_s']:.0f} s simulated): P99 TTFT "
             f"{run['p99_ms']['ttft']:.0f} ms, P99 TPOT {run['p99_ms']['tpot']:.1f} ms, P99 E2E "
             f"{run['p99_ms']['e2e'] / 1e3:.1f} s, {run['within_all_slos']:.1%} within all SLOs, "
             f"passes: {run['passes']}",
             f"exact over the sized candidates: {order['exact']}; over every candidate: "
             f"{order['exact'] and plan['screen']['n_dropped'] == 0} ({plan['screen']['n_dropped']} dropped by the "
             f"screen, an estimate, not a bound)",
             f"disaggregated: {plan['disaggregated'].get('verdict', plan['disaggregated'].get('reason'))}"]
    for engine, line in plan["launch"]["layout_lines"].items():
        lines.append(f"{engine}: {line['command']}")
        lines += [f"  not expressible in {engine}: {gap}" for gap in line["not_expressible"]]
    for role in ("prefill", "decode"):  # the P:D groups' own servers (their layouts), SGLang's spelling
        line = ((plan["disaggregated"].get("launch") or {}).get(role) or {}).get("sglang")
        if line:
            lines.append(f"P:D {role} server (sglang): {line['command']}")
    return lines
