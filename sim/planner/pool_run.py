"""Running a pool plan (sim/planner/pool.py): one `make_plan` per model, then the packing and the bill."""

from __future__ import annotations

from pathlib import Path

from sim.errors import InputError
from sim.inputs.hardware import load_hardware
from sim.planner.billing import billing_of
from sim.planner.pool import PoolModel, PoolSpec, workload_of
from sim.planner.pool_pack import PoolReplica, pack, separate_nodes


def _model_plan(entry: PoolModel, spec: PoolSpec, spec_dir: Path, backend, progress) -> dict:
    """plan.json of one pool entry, planned on the pool's hardware and priced per GPU used."""
    from sim.inputs.config import EngineConfig
    from sim.inputs.engines.default import with_default_engine
    from sim.inputs.slo import parse_slo
    from sim.inputs.vllm_names import undash_keys
    from sim.inputs.workload import load_workload
    from sim.planner.defaults import plan_policies
    from sim.planner.plan import SearchSettings, make_plan
    from sim.run.invoke import resolve_seed
    from sim.yamlio import validate

    workload = workload_of(entry, spec_dir)
    slo = parse_slo([f"{key}={value}" for key, value in entry.slo.items()], entry.min_finished, where="slo")
    knobs = undash_keys(dict(entry.engine or {}), "engine")  # vLLM's dashed names too, as a config YAML
    knobs = with_default_engine(knobs)  # plan's engine when the entry names none (`engine: none`: generic)
    base = resolve_seed(validate(EngineConfig, {**knobs, "model": entry.model}, "engine"), workload,
                        entry.workload_format)
    trace = load_workload(workload, entry.workload_format, seed=base.seed)
    settings = SearchSettings(max_requests=spec.max_requests, verify=spec.verify)
    prices = {} if spec.price_usd_per_gpu_hour is None else {spec.hardware: spec.price_usd_per_gpu_hour}
    policies = entry.policy or spec.policy or plan_policies(base.engine)  # plan's default: the engine's own
    return make_plan(trace, base, [spec.hardware], entry.tp or spec.tp, policies, slo,
                     entry.target_qps, settings, backend=backend, progress=progress, prices=prices,
                     billing={spec.hardware: "gpu"})


def _entry_row(entry: PoolModel, plan: dict) -> dict:
    best = plan["recommended"]
    row = {"name": entry.name, "model": entry.model, "workload": plan["workload"], "target_qps": entry.target_qps,
           "slo": plan["slo"], "recommended": None, "launch": None, "launch_simulated": None}
    if best is not None:
        keep = ("hardware", "tp", "policy", "knobs", "layout", "gpus_per_replica", "replicas", "gpus",
                "max_qps_per_replica", "verified", "cost_per_hour_usd", "usd_per_m_output_tokens")
        row["recommended"] = {k: best.get(k) for k in keep}
        run = best.get("verified_run")
        row["recommended"]["verified_p99_ms"] = None if run is None else run["p99_ms"]
        row["launch"] = plan["launch"]["command"]
        row["launch_simulated"] = plan["launch"]["simulated"]  # `# infersim simulated: <engine> <version>`
    return row


def _prefixed(progress, label: str):
    """`progress` with each stage named after the pool entry it plans (None stays None)."""
    if progress is None:
        return None
    return lambda stage, done, total: progress(f"{label} {stage}", done, total)


def plan_pool(spec: PoolSpec, spec_path: Path, backend, progress=None) -> dict:
    """pool.json: per model its recommended cluster (replicas, GPUs) and launch line; the replicas of all
    packed onto the pool (nodes, scale-up domains); the total GPUs, nodes, domains and $ per hour under
    the pool's billing, and what the models would take on separate nodes. `complete` is False when some
    model has no verified cluster (then nothing is packed)."""
    hw = load_hardware(spec.hardware)
    price = spec.price_usd_per_gpu_hour or hw.cost_per_hour_usd
    if price is None:
        raise InputError(spec_path, "price_usd_per_gpu_hour", f"profile {hw.name} has no cost_per_hour_usd; give one")
    rows = []
    for i, entry in enumerate(spec.models):
        try:
            plan = _model_plan(entry, spec, spec_path.parent, backend, _prefixed(progress, f"{entry.name} ({i + 1}/"
                                                                                      f"{len(spec.models)})"))
        except InputError as error:  # which entry of which file, then what the planner said
            raise InputError(spec_path, f"models.{i} ({entry.name})", error.line()) from None
        rows.append(_entry_row(entry, plan))
    billing = billing_of(hw, spec.billing)
    out = {"hardware": hw.name, "price_usd_per_gpu_hour": price,
           "price_from": "price_usd_per_gpu_hour" if spec.price_usd_per_gpu_hour else "profile cost_per_hour_usd",
           "billing": {"unit": billing.unit, "gpus_per_unit": billing.gpus_per_unit,
                       "from": "billing" if spec.billing else "profile"},
           "models": rows, "complete": all(r["recommended"] is not None for r in rows)}
    if not out["complete"]:
        return {**out, "packing": None, "total": None, "separately": None}
    replicas = [PoolReplica(r["name"], k, r["recommended"]["gpus_per_replica"])
                for r in rows for k in range(r["recommended"]["replicas"])]
    node_gpus = hw.interconnect.max_gpus_per_node
    packing = pack(replicas, node_gpus, hw.scale_up_gpus)
    billed = {"gpu": packing["gpus_used"], "node": packing["gpus_in_nodes"],
              "rack": packing["n_domains"] * packing["gpus_per_domain"]}[billing.unit]
    n_alone = separate_nodes(replicas, node_gpus)
    return {**out, "packing": packing,
            "total": {"gpus_used": packing["gpus_used"], "nodes": packing["n_nodes"], "domains": packing["n_domains"],
                      "billed_gpus": billed, "cost_per_hour_usd": billed * price},
            "separately": {"nodes": n_alone, "gpus_in_nodes": n_alone * node_gpus,
                           "whole_node_cost_per_hour_usd": n_alone * node_gpus * price}}
