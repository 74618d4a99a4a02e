"""`infersim simulate`: replay a trace through a policy on a replica set; print and write the results."""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from sim.cli.common import console, print_json
from sim.cli.group_flags import with_group_flags
from sim.cli.outputs import claim
from sim.cli.slo_flags import goodput_option, min_finished_option, resolve_slo, slo_line, slo_option
from sim.cli.summary_print import print_energy_notice, print_intervals, print_load_warnings, print_summary
from sim.errors import InputError
from sim.inputs.config import load_config
from sim.inputs.vllm_names import policy_from_vllm_flags
from sim.inputs.workload.bench import bench_workload
from sim.inputs.workload.trace import ClosedLoop
from sim.run.destination import FileOut, FolderOut
from sim.run.energy_summary import DEFAULT_PUE, DEFAULT_USD_PER_KWH, check_electricity
from sim.run.invoke import (
    DEFAULT_TRACE,
    RUN_FILES,
    is_synthetic,
    load_run_workload,
    resolve_seed,
    run,
    without_unread_prefix_ids,
)
from sim.run.summary import parse_percentiles

PROGRESS_AFTER_WALL_S = 2.0
NOT_CONFIG = ("trace", "trace_format", "bench", "config", "rate_scale", "qps", "max_requests", "out", "as_json",
              "record_steps", "slo", "goodput_min", "percentiles", "csv", "uncertainty", "workers", "backend",
              "address", "goodput_pairs", "ctx", "trace_qps", "enable_prefix_caching", "enable_chunked_prefill",
              "group_knobs", "save_detailed", "usd_per_kwh", "pue")


def _opt(help_text: str, *names: str):
    return typer.Option(None, *names, help=help_text, show_default=False)


class _LazyProgress:
    """A progress bar that only appears once a run has taken more than a couple of seconds."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.progress_wall_time_start_s = time.monotonic()
        self.bar: Progress | None = None
        self.task = None

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or time.monotonic() - self.progress_wall_time_start_s < PROGRESS_AFTER_WALL_S:
            return
        if self.bar is None:
            self.bar = Progress(TextColumn("simulating"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                                TimeElapsedColumn(), console=console, transient=True)
            self.bar.start()
            self.task = self.bar.add_task("requests", total=total)
        self.bar.update(self.task, completed=done)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


@with_group_flags  # --prefill-* / --decode-* (sim/cli/group_flags.py)
def simulate(
    ctx: typer.Context,
    trace: str = typer.Option(None, "--trace", "-t", show_default=False,
                              help=f"trace file, workload spec YAML or bundled name [{DEFAULT_TRACE}]"),
    trace_format: str = _opt("force a trace format (azure, mooncake, splitwise, ...)", "--format"),
    bench: str = _opt("benchmark workload instead of --trace: 'batch=8,isl=32,osl=128' (fixed batch), "
                      "'requests=1000,isl=128,osl=128' (infinite rate), add 'concurrency=32[,think_s=..,think_cv=..,"
                      "jitter=..]' for a closed loop", "--bench"),
    config: Path = _opt("config YAML (keys = these flags with underscores)", "--config", "-c"),
    engine: str = _opt("engine preset: vllm | sglang | trtllm | lmdeploy | a YAML path (any flag overrides it)",
                       "--engine", "-e"),
    model: str = _opt("bundled model name or YAML/config.json path [llama-3-8b]", "--model", "-m"),
    hardware: str = _opt("bundled profile name or YAML path [h100-sxm]", "--hardware", "-H"),
    policy: str = _opt("static | continuous | chunked | radix [continuous]", "--policy", "-p"),
    tp: int = _opt("tensor parallel GPUs per replica [1]", "--tp", "--tensor-parallel-size"),
    pp: int = _opt("pipeline stages per replica (vLLM --pipeline-parallel-size, SGLang --pp-size) [1]", "--pp",
                   "--pipeline-parallel-size", "--pp-size"),
    dp: int = _opt("attention data-parallel ranks (MoE; see docs/parallelism.md) [1]", "--dp", "--data-parallel-size"),
    ep: int = _opt("expert-parallel size (MoE) [none]", "--ep", "--expert-parallel-size"),
    enable_expert_parallel: bool = typer.Option(None, "--enable-expert-parallel", show_default=False,
                                                help="vLLM: experts sharded over dp x tp"),
    enable_dp_attention: bool = typer.Option(None, "--enable-dp-attention", show_default=False,
                                             help="SGLang: --dp attention ranks inside --tp"),
    nodes: int = _opt("scale-up domains (nodes, NVL racks) the cluster has [as many as needed]", "--nodes"),
    moe_a2a_backend: str = _opt("EP all-to-all: nccl | deepep | allgather_reducescatter [nccl]", "--moe-a2a-backend"),
    deepep_mode: str = _opt("deepep kernels: auto | normal | low_latency [auto]", "--deepep-mode"),
    moe_load_imbalance: float = _opt("EP: max / mean tokens per GPU [the model's, 1.0]", "--moe-load-imbalance"),
    enable_two_batch_overlap: bool = typer.Option(None, "--enable-two-batch-overlap", show_default=False,
                                                  help="EP: all-to-alls hidden behind the other micro-batch"),
    ep_num_redundant_experts: int = _opt("EP: redundant expert copies (EPLB slots) [0]", "--ep-num-redundant-experts",
                                         "--num-redundant-experts"),
    replicas: int = _opt("replicas behind the router [1]", "--replicas"),
    router: str = _opt("round_robin | random | least_outstanding | least_kv | prefix_affinity", "--router"),
    replica_hardware: str = _opt("one profile per replica, comma-separated (a mixed cluster)", "--replica-hardware"),
    weight_dtype: str = _opt("bf16 | fp16 | fp8 | int8 | int4 (weight-only) | fp4 | auto [auto: as stored]",
                             "--weight-dtype"),
    kv_dtype: str = _opt("bf16 | fp16 | fp8 | int8 [bf16; a preset's default for quantized weights]",
                         "--kv-dtype", "--kv-cache-dtype"),
    max_num_seqs: int = _opt("vLLM max_num_seqs [256]", "--max-num-seqs"),
    max_num_batched_tokens: int = _opt("vLLM max_num_batched_tokens [8192]", "--max-num-batched-tokens"),
    block_size: int = _opt("KV block size in tokens [16]", "--block-size"),
    gpu_memory_utilization: float = _opt("share of HBM for the engine [0.9]", "--gpu-memory-utilization"),
    max_model_len: int = _opt("context limit [model's max_position_embeddings]", "--max-model-len"),
    swap_space: float = _opt("GiB of host memory per GPU for swapped KV [4]", "--swap-space"),
    num_gpu_blocks_override: int = _opt("pin the number of KV blocks", "--num-gpu-blocks-override"),
    chunk_size: int = _opt("chunked/radix: cap on ONE request's prompt chunk per step [none]; the step budget "
                           "is --max-num-batched-tokens", "--chunk-size", "--long-prefill-token-threshold"),
    num_scheduler_steps: int = _opt("vLLM multi-step scheduling: decode steps per schedule [preset / 1]",
                                    "--num-scheduler-steps"),
    enforce_eager: bool = typer.Option(None, "--enforce-eager/--cuda-graphs", show_default=False,
                                       help="disable / keep the preset's CUDA graphs (batch padding)"),
    allreduce_kind: str = _opt("nccl | custom | auto (per message the faster) [preset / nccl]", "--allreduce"),
    preemption_mode: str = _opt("recompute | swap [recompute]", "--preemption-mode"),
    radix_ordering: str = _opt("fcfs | lpm (longest prefix first) [fcfs]", "--radix-ordering"),
    batching_window_s: float = _opt("static: wait this long for a batch to fill [0]", "--batching-window-s"),
    seed: int = _opt("random seed [the config's, else the workload spec's, else 0]", "--seed"),
    spec_tokens: int = _opt("speculative decoding: k proposed tokens per step [0: off]", "--spec-tokens"),
    spec_acceptance: str = _opt("acceptance rate in [0,1], or one per position, comma-separated [0.8]",
                                "--spec-acceptance"),
    spec_method: str = _opt("heads (EAGLE-style) | draft (a draft model) | mtp [heads]", "--spec-method"),
    spec_draft_model: str = _opt("draft model spec for --spec-method draft", "--spec-draft-model"),
    spec_draft_cost: float = _opt("heads: one proposal's cost / a decode step's [0.05]", "--spec-draft-cost"),
    cpu_cache_gib: float = _opt("radix: host-memory tier for evicted prefix blocks, GiB per replica [0]",
                                "--cpu-cache-gib", "--kv-offloading-size"),
    enable_lora: bool = typer.Option(None, "--enable-lora", show_default=False,
                                     help="serve the workload's LoRA adapters (vLLM's rules, docs/lora.md)"),
    max_loras: int = _opt("LoRA: distinct adapters per batch = GPU slots [vLLM: 1]", "--max-loras"),
    max_lora_rank: int = _opt("LoRA: rank the slots are allocated for [vLLM: 16]", "--max-lora-rank"),
    max_cpu_loras: int = _opt("LoRA: adapters cached in host memory [vLLM: max_loras]", "--max-cpu-loras"),
    lora_disk_gb_s: float = _opt("LoRA: disk read GB/s of an adapter not cached on the host [2]", "--lora-disk-gb-s"),
    prefill_replicas: int = _opt("disaggregated: prefill replicas (with --decode-replicas)", "--prefill-replicas"),
    decode_replicas: int = _opt("disaggregated: decode replicas", "--decode-replicas"),
    kv_transfer_gb_s: float = _opt("disaggregated: KV link GB/s per GPU pair [from the profiles]",
                                   "--kv-transfer-gb-s"),
    kv_transfer_latency_us: float = _opt("disaggregated: KV link latency [from the profiles]",
                                         "--kv-transfer-latency-us"),
    rate_scale: float = _opt("speed the trace up by this factor", "--rate-scale"),
    qps: float = _opt("Poisson arrivals at this many req/s, the trace's lengths in order (vLLM bench's "
                      "--request-rate; inf: all at t=0)", "--qps", "--rate", "--request-rate"),
    trace_qps: float = _opt("the trace's OWN arrival shape re-timed to this mean req/s (bursts kept; what plan "
                            "sizes for)", "--trace-qps"),
    max_requests: int = _opt("replay only the first N requests", "--max-requests", "--num-prompts"),
    enable_prefix_caching: bool = typer.Option(None, "--enable-prefix-caching/--no-enable-prefix-caching",
                                               show_default=False, help="vLLM's switch: policy radix"),
    enable_chunked_prefill: bool = typer.Option(None, "--enable-chunked-prefill/--no-enable-chunked-prefill",
                                                show_default=False, help="vLLM's switch: policy chunked"),
    slo: list[str] = slo_option(),
    goodput_pairs: list[str] = goodput_option(),
    goodput_min: float = min_finished_option(),
    percentiles: str = _opt("latency percentiles to report, e.g. 50,90,95,99 [50,90,99]", "--percentiles"),
    csv: Path = _opt("also write one row per request to this CSV file", "--csv"),
    record_steps: bool = typer.Option(False, "--record-steps", help="also write steps.parquet"),
    save_detailed: bool = typer.Option(False, "--save-detailed",
                                       help="bench_serve.json also holds `itls`, one list per request (as vLLM's "
                                            "--save-detailed; its size grows with the run's output tokens)"),
    usd_per_kwh: float = typer.Option(DEFAULT_USD_PER_KWH, "--usd-per-kwh",
                                      help="electricity price for summary.json's energy (docs/power.md)"),
    pue: float = typer.Option(DEFAULT_PUE, "--pue", help="facility power / IT power for the energy's kWh and $"),
    out: Path = typer.Option(None, "--out", "-o", help="write summary.json and requests.parquet here"),
    as_json: bool = typer.Option(False, "--json", help="print summary.json instead of the table"),
    uncertainty: int = typer.Option(None, "--uncertainty", show_default=False,
                                    help="also run N perturbed replays; summary.json gains p10/p50/p90 `intervals`"),
    workers: int = typer.Option(1, "--workers", "-w",
                                help="simulate the replicas (round_robin or random router, open loop, aggregated) "
                                     "and the --uncertainty replays in up to N processes: same output, faster"),
    backend: str = typer.Option("local", "--backend", help="where --workers run: local (processes) | ray"),
    address: str = typer.Option(None, "--address", help="ray: address of a running cluster"),
    group_knobs: dict | None = None,
) -> None:
    """Replay a trace through a scheduler policy on simulated GPUs.

    Files hold seconds (`*_s`) and the latency statistics again in milliseconds (`*_ms`); tables show ms."""
    overrides = {k: v for k, v in locals().items() if k not in NOT_CONFIG}
    electricity = check_electricity(usd_per_kwh, pue)
    claim([FolderOut("--out", out, RUN_FILES)], [FileOut("--csv", csv)])  # refused before any work, locked
    overrides["record_steps"] = record_steps or None
    if replica_hardware is not None:
        overrides["replica_hardware"] = [name.strip() for name in replica_hardware.split(",")]
        overrides["replicas"] = overrides.get("replicas") or len(overrides["replica_hardware"])
    wanted = parse_percentiles(percentiles)
    slo_spec = resolve_slo(slo, goodput_pairs, ctx.args, goodput_min)
    if slo_spec is not None:
        overrides["slo"] = slo_spec.per_request_limits_s()
    _feature_overrides(overrides)
    overrides.update(group_knobs or {})
    overrides["policy"], radix_chunked = policy_from_vllm_flags(policy, enable_prefix_caching, enable_chunked_prefill)
    if radix_chunked is not None:
        overrides["radix_chunked"] = radix_chunked
    cfg = resolve_seed(load_config(config, overrides), trace, trace_format)
    if bench is not None:
        if any(v is not None for v in (trace, trace_format, rate_scale, max_requests, qps, trace_qps)):
            raise InputError("--bench", None, "replaces the workload: do not combine with --trace, --format, "
                                              "--rate-scale, --qps or --max-requests")
        workload = bench_workload(bench)
    else:
        workload = without_unread_prefix_ids(cfg, _workload(trace, trace_format, rate_scale, max_requests, cfg.seed,
                                                            qps, trace_qps))
    if slo_spec is not None and not as_json:
        console.print(slo_line(slo_spec))
    progress = _LazyProgress(enabled=not as_json and console.is_terminal)
    resample = None
    if uncertainty is not None and bench is None and (qps is not None or is_synthetic(trace, trace_format)):
        def resample(seed: int):
            return without_unread_prefix_ids(cfg, _workload(trace, trace_format, rate_scale, max_requests, seed, qps,
                                                            trace_qps))
    try:
        if save_detailed and out is None:
            raise InputError("--save-detailed", None, "adds itls to DIR/bench_serve.json: give --out DIR")
        output = run(cfg, workload, out, progress, uncertainty, resample, wanted, slo_spec, csv, workers, backend,
                     address, detailed_bench=save_detailed, electricity=electricity)
    finally:
        progress.close()
    if as_json:
        print_json(output.summary)
        return
    print_summary(output.summary)
    print_energy_notice(output.summary, output.result)
    print_intervals(output.summary)
    if out is not None:
        steps = " and steps.parquet" if cfg.record_steps else ""
        console.print(f"wrote {out}/summary.json, requests.parquet{steps} and bench_serve.json (vllm bench serve's "
                      f"result shape)")
    if csv is not None:
        console.print(f"wrote {csv}")
    print_load_warnings(output.summary)  # last: a run that exits 0 having rejected requests ends saying so


def _workload(trace, trace_format, rate_scale, max_requests, seed, qps, trace_qps):
    """load_run_workload, plus --request-rate inf (all at t=0) and --trace-qps (the trace's shape re-timed)."""
    import math

    from sim.inputs.budget import check_rate_qps
    from sim.inputs.vllm_names import all_at_once
    from sim.inputs.workload.transforms import scale_rate

    if sum(v is not None for v in (qps, trace_qps, rate_scale)) > 1:
        raise InputError("--qps", None, "give at most one of --qps (Poisson), --trace-qps (the trace's shape) and "
                                        "--rate-scale")
    infinite = qps is not None and math.isinf(qps) and qps > 0
    workload = load_run_workload(trace, trace_format, rate_scale, max_requests, seed, None if infinite else qps)
    if infinite:
        return all_at_once(workload) if not isinstance(workload, ClosedLoop) else workload
    if trace_qps is None:
        return workload
    check_rate_qps(trace_qps, "--trace-qps")
    return scale_rate(workload, target_qps=trace_qps, where="--trace-qps")


def _feature_overrides(overrides: dict) -> None:
    """CLI spellings of the feature knobs -> config keys (lists)."""
    if overrides.get("spec_acceptance") is not None:
        overrides["spec_acceptance"] = [_rate(part) for part in overrides["spec_acceptance"].split(",")]


def _rate(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InputError("--spec-acceptance", None, f"{text!r} is not a number in [0, 1]") from None
