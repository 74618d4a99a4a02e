"""`infersim plan`: how many GPUs of which kind, TP and policy serve a target rate within the SLOs, at what cost."""

from __future__ import annotations

import os
import time
from pathlib import Path

import typer

from sim.cli.common import StageProgress, console, print_json
from sim.cli.plan_report import print_plan
from sim.cli.slo_flags import goodput_option, min_finished_option, resolve_slo, slo_line, slo_option
from sim.errors import InputError
from sim.inputs.budget import DEFAULT_MAX_PLAN_CANDIDATES
from sim.run.energy_summary import DEFAULT_PUE, DEFAULT_USD_PER_KWH
from sim.run.invoke import DEFAULT_TRACE

PLAN_FILES = ("plan.json", "latency_vs_rate.png", "cost.png", "pareto.png", "k8s.yaml")  # what a plan folder may hold
EMITS = ("k8s",)
DEFAULT_SCREEN_KEEP = 4  # candidates sized per hardware under a layout search (sim/planner/screen.py)


def _knob(help_text: str, *names: str):
    return typer.Option(None, *names, help=f"engine knob for every candidate: {help_text}", show_default=False)


def plan(
    ctx: typer.Context,
    workload: str = typer.Option(DEFAULT_TRACE, "--workload", "-w", help="trace file, spec YAML or bundled name"),
    workload_format: str = typer.Option(None, "--format", help="force a trace format (azure, mooncake, ...)"),
    model: str = typer.Option(None, "--model", "-m", help="bundled model name or YAML/config.json path"),
    model_id: str = typer.Option(None, "--model-id", show_default=False,
                                 help="the checkpoint the launch command serves, e.g. meta-llama/Llama-3.1-8B-Instruct "
                                      "[the model spec's hf_name: same architecture, maybe the base checkpoint]"),
    slo: list[str] = slo_option(),
    goodput_pairs: list[str] = goodput_option(),
    hardware: str = typer.Option("h100-sxm,a100-80g-sxm,h200", "--hardware", "-H", help="comma-separated profiles"),
    tp: str = typer.Option("1,2,4,8", "--tp", "--tensor-parallel-size", help="comma-separated tensor-parallel sizes"),
    price: list[str] = typer.Option(None, "--price", show_default=False,
                                    help="PROFILE=USD per GPU-hour, repeatable: your price instead of the profile's "
                                         "cost_per_hour_usd (e.g. h100-sxm=2.10)"),
    billing: list[str] = typer.Option(None, "--billing", show_default=False,
                                      help="how GPUs are paid for: gpu (those used) | node (whole nodes: an HGX "
                                           "server, a GB200 tray) | rack (whole NVLink domains: an NVL72 rack); "
                                           "UNIT for every profile or PROFILE=UNIT, repeatable [each profile's "
                                           "`billing`: gpu, gb200-nvl72 rack]"),
    policy: str = typer.Option(None, "--policy", "-p", show_default=False,
                               help="comma-separated scheduler policies [the engine's default: radix for vllm "
                                    "(prefix caching on chunked prefill); chunked,radix with --engine none]"),
    search: list[str] = typer.Option(None, "--search", help="engine knob to search, KEY=v1,v2 (repeatable): "
                                                            "max_num_seqs, max_num_batched_tokens, block_size, ..."),
    target_qps: float = typer.Option(..., "--target-qps",
                                     help="the mean arrival rate the cluster must serve (req/s): the workload's OWN "
                                          "arrival shape re-timed to it, bursts kept"),
    goodput: float = min_finished_option(),
    max_requests: int = typer.Option(1000, "--max-requests", help="size replicas on N requests of the workload"),
    sizing: str = typer.Option("busiest", "--sizing", help="busiest (its densest N requests) | head (its first N)"),
    verify: bool = typer.Option(True, "--verify/--no-verify", help="replay the whole workload through the cluster"),
    max_verify_runs: int = typer.Option(6, "--max-verify-runs", help="whole-workload runs per verified candidate"),
    max_verified: int = typer.Option(12, "--max-verified",
                                     help="candidates verified at most (by lower bound; the plan says when this "
                                          "stopped it before the cheapest cluster was certain)"),
    disagg: str = typer.Option(None, "--disagg", show_default=False,
                               help="P:D ratios, e.g. 1:1,1:2,2:1: also verify the recommendation as disaggregated "
                                    "prefill/decode clusters (k*P + k*D replicas, smallest k that meets the SLOs; "
                                    "at most --max-verify-runs runs per ratio) and compare GPUs and cost"),
    pp: str = typer.Option(None, "--pp", "--pipeline-parallel-size", show_default=False,
                           help="layout search: pipeline stages to try, e.g. 1,2 (sim/planner/layouts.py)"),
    ep: str = typer.Option(None, "--ep", show_default=False,
                           help="layout search: expert parallelism over the MoE layer's GPUs: off | on | off,on"),
    dp: str = typer.Option(None, "--dp", "--data-parallel-size", show_default=False,
                           help="layout search: attention data-parallel ranks (with EP), e.g. 1,2,4,8"),
    enable_expert_parallel: bool = typer.Option(None, "--enable-expert-parallel", show_default=False,
                                                help="vLLM's name for --ep on (EP layouts only)"),
    layout_search: bool = typer.Option(None, "--layout-search/--no-layout-search", show_default=False,
                                       help="search EP and DP-attention layouts (--ep off,on --dp 1,2,4,8) [on for "
                                            "a MoE model when no layout flag is given]; budget: --screen-keep"),
    moe_a2a_backend: str = typer.Option(None, "--moe-a2a-backend", show_default=False,
                                        help="layout search: MoE all-to-all backends with EP, comma-separated: nccl, "
                                             "deepep, allgather_reducescatter (vLLM's default) [nccl]"),
    max_replica_gpus: int = typer.Option(None, "--max-replica-gpus", show_default=False,
                                         help="layout search: largest replica in GPUs [72]"),
    screen_keep: int = typer.Option(None, "--screen-keep", show_default=False,
                                    help="size only the N candidates per hardware of lowest estimated cost (an "
                                         "analytic estimate, not a bound; plan.json `screen`) [4 with a layout "
                                         "search, else all]"),
    config: Path = typer.Option(None, "--config", "-c", help="base engine config YAML (block size, max_num_seqs...)"),
    max_num_seqs: int = _knob("vLLM max_num_seqs [256]", "--max-num-seqs"),
    max_num_batched_tokens: int = _knob("vLLM max_num_batched_tokens [8192]", "--max-num-batched-tokens"),
    block_size: int = _knob("KV block size in tokens [16]", "--block-size"),
    gpu_memory_utilization: float = _knob("share of HBM for the engine [0.9]", "--gpu-memory-utilization"),
    max_model_len: int = _knob("context limit [model's max_position_embeddings]", "--max-model-len"),
    kv_dtype: str = _knob("bf16 | fp16 | fp8 | int8", "--kv-dtype", "--kv-cache-dtype"),
    weight_dtype: str = _knob("bf16 | fp16 | fp8 | int8 | int4 | fp4 | auto [auto: as the checkpoint stores it]",
                              "--weight-dtype"),
    quantization: str = _knob("vLLM's --quantization: fp8 (online FP8 of a bf16 checkpoint) or the checkpoint's "
                              "own method (served as stored)", "--quantization", "-q"),
    speculative_config: str = _knob("vLLM's --speculative-config JSON: method (mtp | eagle | draft_model), "
                                    "num_speculative_tokens, model", "--speculative-config"),
    chunk_size: int = _knob("cap on one request's prefill chunk per step (vLLM's long_prefill_token_threshold)",
                            "--chunk-size", "--long-prefill-token-threshold"),
    cpu_cache_gib: float = _knob("radix candidates: host-memory prefix tier, GiB per replica (vLLM's "
                                 "--kv-offloading-size)", "--cpu-cache-gib", "--kv-offloading-size"),
    router: str = _knob("round_robin | random | least_outstanding | least_kv | prefix_affinity", "--router"),
    engine: str = typer.Option(None, "--engine", show_default=False,
                               help="engine preset (vllm | sglang | trtllm | lmdeploy | YAML | none): its knobs and "
                                    "CPU cost, and its launch command [vllm, the newest vLLM preset]"),
    seed: int = typer.Option(None, "--seed", show_default=False,
                             help="random seed [the config's, else the workload spec's, else 0]"),
    backend: str = typer.Option("local", "--backend", help="local (processes) | ray"),
    address: str = typer.Option(None, "--address", help="ray: address of a running cluster"),
    workers: int = typer.Option(min(2, os.cpu_count() or 1), "--workers", help="parallel simulations"),
    usd_per_kwh: float = typer.Option(DEFAULT_USD_PER_KWH, "--usd-per-kwh",
                                      help="electricity price for the rows' energy (docs/power.md)"),
    pue: float = typer.Option(DEFAULT_PUE, "--pue", help="facility power / IT power for the rows' kW, kWh and $"),
    power_budget_kw: float = typer.Option(None, "--power-budget-kw", show_default=False,
                                          help="recommend the cheapest cluster that meets the SLOs within N kW "
                                               "(GPUs at their modelled mean power at the target rate x PUE; "
                                               "host, NIC and switch power not counted: docs/power.md)"),
    top: int = typer.Option(10, "--top", help="candidates shown in the table"),
    out: Path = typer.Option(None, "--out", "-o", help="write plan.json and the plots here"),
    as_json: bool = typer.Option(False, "--json", help="print plan.json instead of the table"),
    emit: str = typer.Option(None, "--emit", show_default=False,
                             help="k8s: also write OUT/k8s.yaml, the recommendation as Kubernetes manifests for "
                                  "its engine: Deployment or LeaderWorkerSet, Service, HorizontalPodAutoscaler "
                                  "(sim/planner/k8s.py); with --disagg, when a P:D split is cheapest, its prefill "
                                  "and decode workloads instead (sim/planner/k8s_disagg.py)"),
    uncertainty: int = typer.Option(None, "--uncertainty", show_default=False,
                                    help="N >= 2: rerun the recommended cluster under N perturbed cost models and "
                                         "report p10/p50/p90 of its capacity (plan.json recommended.uncertainty)"),
    max_candidates: int = typer.Option(DEFAULT_MAX_PLAN_CANDIDATES, "--max-candidates",
                                       help="refuse a search of more candidates than this (hardware x TP x layouts x "
                                            "policies x --search values)"),
) -> None:
    """Size a cluster for the workload's real traffic, verify it on the whole workload, recommend the cheapest.

    Per hardware x TP x policy (x --search knobs): the highest rate one replica sustains on the workload's
    busiest stretch; replicas, GPUs and cost for the target rate; then the cheapest clusters replay the WHOLE
    workload at the target rate, adding (or removing) replicas until the SLOs hold.

    Sustained rate: every SLO percentile, over the finished requests, is within its limit and >= --min-finished
    finished.

    Sizing: the densest --max-requests consecutive requests, re-timed as the whole workload would be at the rate
    (so its bursts keep their height); the first 10% warm up and are not judged.

    Search: double or halve, then bisect to 4.4% steps (assumes lower rates never do worse).

    Each candidate is a cluster of one hardware kind (simulate a mixed one with simulate --replica-hardware)."""
    from sim.cli.outputs import claim
    from sim.inputs.budget import check_layouts
    from sim.inputs.config import load_config
    from sim.inputs.model import load_model
    from sim.inputs.vllm_names import kv_dtype_from_vllm
    from sim.inputs.workload import load_workload
    from sim.inputs.workload.trace import ClosedLoop
    from sim.output import write_json
    from sim.planner.band import capacity_band
    from sim.planner.billing import parse_billing
    from sim.planner.candidates import parse_list, parse_prices, parse_tps
    from sim.planner.defaults import default_policies, expert_parallel_flag, plan_engine, vllm_spellings
    from sim.planner.disagg import parse_pd_ratios
    from sim.planner.energy import check_power_budget
    from sim.planner.knobs import check_candidate_count, parse_knob_search
    from sim.planner.layouts import default_layouts, parse_layout_grid
    from sim.planner.plan import SearchSettings, make_plan
    from sim.planner.plots import write_plots
    from sim.planner.rows import run_on
    from sim.run.backends import make_backend
    from sim.run.destination import FolderOut
    from sim.run.energy_summary import check_electricity
    from sim.run.folder import atomic_run_dir
    from sim.run.intervals import check_replays
    from sim.run.invoke import resolve_seed

    wall_time_start_s = time.monotonic()  # reported only
    claim([FolderOut("--out", out, PLAN_FILES)])  # refused before any work, locked while the plan runs
    for flag, value in (("--workers", workers), ("--top", top)):
        if value < 1:
            raise InputError(flag, None, f"must be at least 1; got {value}")
    electricity = check_electricity(usd_per_kwh, pue)
    check_power_budget(power_budget_kw)
    slo_spec = resolve_slo(slo, goodput_pairs, ctx.args, goodput, required=True)
    knobs = {"max_num_seqs": max_num_seqs, "max_num_batched_tokens": max_num_batched_tokens, "block_size": block_size,
             "gpu_memory_utilization": gpu_memory_utilization, "max_model_len": max_model_len,
             "kv_dtype": kv_dtype_from_vllm(kv_dtype), "weight_dtype": weight_dtype, "chunk_size": chunk_size,
             "cpu_cache_gib": cpu_cache_gib, "router": router}
    overrides = {"model": model, "seed": seed, "engine": plan_engine(engine, config), **knobs,
                 **vllm_spellings(model, config, weight_dtype, quantization, speculative_config)}
    policies = parse_list(policy or default_policies(overrides["engine"], config), "--policy")
    if cpu_cache_gib or chunk_size:  # the base is validated on its own: give it a policy that takes these knobs
        overrides["policy"] = "radix" if "radix" in policies else policies[0]
    base = resolve_seed(load_config(config, overrides), workload, workload_format)
    if enable_expert_parallel is not None:
        ep = expert_parallel_flag(ep, enable_expert_parallel)
    hardware_names, tps = parse_list(hardware, "--hardware"), parse_tps(tp)
    knob_grid = parse_knob_search(search or [])
    prices = parse_prices(price, hardware_names)
    billing_units = parse_billing(billing, hardware_names)
    pd_ratios = None if disagg is None else parse_pd_ratios(disagg)
    check_layouts(pd_ratios or [], "--disagg")  # sim.inputs.budget: replicas of every layout
    if pd_ratios and not verify:
        raise InputError("--disagg", None, "compares verified clusters; drop --no-verify")
    if uncertainty is not None:
        check_replays(uncertainty)
    layouts = parse_layout_grid(pp, ep, dp, moe_a2a_backend, max_replica_gpus)
    layouts = default_layouts(layouts, layout_search, load_model(base.model))
    if screen_keep is not None and screen_keep < 1:
        raise InputError("--screen-keep", None, f"must be at least 1; got {screen_keep}")
    if screen_keep is None and layouts is not None:
        screen_keep = DEFAULT_SCREEN_KEEP
    if max_verify_runs < 1:
        raise InputError("--max-verify-runs", None, f"must be at least 1; got {max_verify_runs}")
    check_candidate_count(hardware_names, tps, policies, knob_grid, layouts, max_candidates)
    runner = make_backend(backend, max(1, workers) if workers is not None else None, address)
    trace = load_workload(workload, workload_format, seed=base.seed)
    if isinstance(trace, ClosedLoop):
        raise InputError(workload, None, "a closed-loop spec has no arrival rate to plan for; give a trace")
    if emit is not None and (emit not in EMITS or out is None):
        raise InputError("--emit", emit, f"one of {', '.join(EMITS)}, with --out DIR (it writes DIR/k8s.yaml)")
    if emit == "k8s":  # an engine without manifests is refused before any planning; nothing is lost
        from sim.planner.k8s import check_k8s_engine
        from sim.planner.launch import SERVERS, assumed_engine

        engine_name = assumed_engine(base)
        check_k8s_engine(engine_name if engine_name in SERVERS else "vllm")
    if max_verified < 1:
        raise InputError("--max-verified", None, f"must be at least 1; got {max_verified}")
    if uncertainty is not None:
        check_replays(uncertainty, len(trace))  # sim.inputs.budget: draws x the requests each replays
    settings = SearchSettings(max_requests=max_requests, sizing=sizing, verify=verify, max_verify_runs=max_verify_runs,
                              max_verified=max_verified, screen_keep=screen_keep)

    def run_search() -> dict:
        with StageProgress(enabled=not as_json, command="plan") as progress:
            result = make_plan(trace, base, hardware_names, tps, policies, slo_spec, target_qps, settings,
                               backend=runner, knob_grid=knob_grid, progress=progress, pd_ratios=pd_ratios,
                               announce=None if as_json else lambda: console.print(slo_line(slo_spec)),
                               model_id=model_id, prices=prices, layouts=layouts, billing=billing_units,
                               electricity=electricity, power_budget_kw=power_budget_kw)
            if uncertainty is not None and result["recommended"] is not None:
                result["recommended"]["uncertainty"] = capacity_band(
                    result, base, trace, slo_spec, settings, uncertainty,
                    lambda fn, args: run_on(runner, fn, args, progress, "cost-model draws"))
            return result

    refusal = None  # a manifest that cannot be written never discards the plan: plan.json and plots are kept
    with runner:
        if out is None:
            result = run_search()
        else:  # the folder is checked before searching and replaced whole after (sim.output.atomic_run_dir)
            with atomic_run_dir(out, PLAN_FILES) as tmp_dir:
                result = run_search()
                write_json(tmp_dir / "plan.json", result)
                write_plots(result, tmp_dir)
                if emit == "k8s" and result["recommended"] is not None:
                    refusal = _write_manifests(result, tmp_dir / "k8s.yaml")
    if as_json:
        print_json(result)
    else:
        print_plan(result, top)
        console.print(f"planned in {time.monotonic() - wall_time_start_s:.1f} s")
        if out is not None:
            written = emit == "k8s" and result["recommended"] is not None and refusal is None
            k8s = _k8s_written(result) if written else ""
            console.print(f"wrote {out}/plan.json, latency_vs_rate.png, cost.png, pareto.png{k8s}")
    if refusal is not None:
        raise InputError(refusal.where, refusal.field,
                         f"{refusal.allowed}; plan.json and the plots are written to {out}")
    if result["recommended"] is None:
        raise typer.Exit(code=1)


def _k8s_written(result: dict) -> str:
    """The `wrote ...` line's k8s.yaml entry, naming the P:D split when the manifests deploy one."""
    from sim.planner.k8s_disagg import chosen_split

    split = chosen_split(result)
    return ", k8s.yaml" if split is None else f", k8s.yaml (the {split['ratio']} x{split['k']} disaggregated layout)"


def _write_manifests(result: dict, path: Path) -> InputError | None:
    """k8s.yaml of the plan, or the InputError saying why it is not written (raised once the plan is saved)."""
    from sim.planner.k8s import manifests_yaml

    try:
        path.write_text(manifests_yaml(result))
    except InputError as error:
        return error
    return None
