"""`infersim pool plan FILE.yaml`: several models, each with its workload and SLOs, on one GPU pool
(sim/planner/pool.py). Machinery is imported inside the command (the CLI starts without it)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from sim.cli.common import ProgressLines, console, new_app, print_json, print_table
from sim.run.human_units import ms_text

pool_app = new_app(help="Several models on one GPU pool: per-model plans, packed, with the total.")

POOL_FILES = ("pool.json",)


@pool_app.command("plan")
def plan(spec: Annotated[Path, typer.Argument(help="a pool YAML (docs/planning.md; workloads/pools/*.yaml)")],
         out: Annotated[Path | None, typer.Option("--out", "-o", help="write pool.json here")] = None,
         workers: Annotated[int, typer.Option("--workers", help="parallel simulations")] = min(2, os.cpu_count() or 1),
         as_json: Annotated[bool, typer.Option("--json", help="print pool.json, not the tables")] = False) -> None:
    """Plan every model of the pool as `infersim plan` plans one (sized, verified, cheapest), pack all
    their replicas onto the pool's nodes and scale-up domains, and bill the pool once: GPUs and nodes per
    model, the packing, the total GPUs / nodes / $ per hour, and what separate nodes per model would take."""
    from sim.cli.outputs import claim
    from sim.errors import InputError
    from sim.output import write_json
    from sim.planner.pool import load_pool_spec
    from sim.planner.pool_run import plan_pool
    from sim.run.backends import make_backend
    from sim.run.destination import FolderOut
    from sim.run.folder import atomic_run_dir

    if workers < 1:
        raise InputError("--workers", None, f"must be at least 1; got {workers}")
    claim([FolderOut("--out", out, POOL_FILES)])  # refused before any work, locked while the pool is planned
    pool = load_pool_spec(spec)
    progress = ProgressLines("pool plan", enabled=not as_json)
    with make_backend("local", workers, None) as backend:
        if out is None:
            result = plan_pool(pool, spec, backend, progress)
        else:  # checked before planning, replaced whole after (sim.output.atomic_run_dir)
            with atomic_run_dir(out, POOL_FILES) as tmp_dir:
                result = plan_pool(pool, spec, backend, progress)
                write_json(tmp_dir / "pool.json", result)
    if as_json:
        print_json(result)
    else:
        print_pool(result)
        if out is not None:
            console.print(f"wrote {out}/pool.json")
    if not result["complete"]:
        raise typer.Exit(code=1)


def print_pool(result: dict) -> None:
    """Per model: its cluster; then the packing and the pool's total."""
    rows = []
    for r in result["models"]:
        best = r["recommended"]
        if best is None:
            rows.append([r["name"], r["model"], f"{r['target_qps']:g}", "-", "-", "-", "-", "no verified cluster"])
            continue
        p99 = best["verified_p99_ms"] or {}
        rows.append([r["name"], r["model"], f"{r['target_qps']:g}", f"tp{best['tp']} {best['policy']}",
                     best["replicas"], best["gpus"], f"{best['cost_per_hour_usd']:.2f}",
                     ", ".join(f"P99 {k.upper()} {ms_text(v)}" for k, v in p99.items() if v is not None)
                     or ("verified" if best["verified"] else "not verified")])
    print_table(f"pool of {result['hardware']} (${result['price_usd_per_gpu_hour']:.2f}/GPU-h, "
                f"{result['price_from']}): each model's cheapest verified cluster",
                ["name", "model", "req/s", "layout", "replicas", "GPUs", "$/h (GPUs used)", "whole workload"], rows)
    if result["packing"] is None:
        console.print("[bold red]incomplete[/bold red]: some model has no verified cluster; nothing packed")
        return
    pack = result["packing"]
    print_table(f"packed ({pack['rule']})", ["domain", "nodes", "replicas", "GPUs used", "idle"],
                [[g["domain"], g["nodes"], " ".join(g["replicas"]), g["gpus_used"], g["gpus_idle"]]
                 for g in pack["groups"]])
    for r in result["models"]:
        if r.get("launch"):
            console.print(f"launch {r['name']} ({r['recommended']['replicas']} x):", soft_wrap=True)
            if r.get("launch_simulated"):
                console.print(f"  {r['launch_simulated']}", soft_wrap=True, markup=False)
            console.print(f"  {r['launch']}", soft_wrap=True, markup=False)
    total, bill, alone = result["total"], result["billing"], result["separately"]
    console.print(f"[bold]pool total[/bold]: {total['gpus_used']} GPUs on {total['nodes']} nodes of "
                  f"{pack['gpus_per_node']} ({total['domains']} scale-up domains of {pack['gpus_per_domain']}); "
                  f"billed per {bill['unit']} ({bill['from']}): {total['billed_gpus']} GPUs = "
                  f"${total['cost_per_hour_usd']:.2f}/hour", soft_wrap=True)
    console.print(f"  each model on nodes of its own: {alone['nodes']} nodes, "
                  f"${alone['whole_node_cost_per_hour_usd']:.2f}/hour by the node", soft_wrap=True)
