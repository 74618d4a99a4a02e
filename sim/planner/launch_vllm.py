"""`vllm serve` flags for every simulated setting vLLM can express, and the list of those it cannot.

Each setting of the simulated replica maps to vLLM's own flag (vLLM V1 engine args, `vllm serve
--help`), or is named in `not_expressible` with what it would take. Flags whose vLLM default is
what the simulation assumed are still written when the plan depends on them (max-model-len, prefix
caching, chunked prefill), so the line does not lean on defaults that change between versions.

Sources: vLLM engine args (docs.vllm.ai, "Engine Arguments"); `--kv-offloading-size` is the host
buffer in GiB summed over the replica's TP x PP ranks and `--kv-offloading-backend native` the
built-in CPU tier (vLLM >= 0.11, `vllm/config/kv_offloading.py` and its tests); the
`--long-prefill-token-threshold` cap on one request's prefill chunk per step is vLLM V1's
scheduler (`vllm/v1/core/sched/scheduler.py`).
"""

from __future__ import annotations

import json

from sim.inputs.config import EngineConfig
from sim.inputs.model import load_model
from sim.inputs.model.weights import AUTO
from sim.planner.launch_layout import vllm_multinode_note

QUANTIZATION_FLAGS = {"fp8": "fp8"}  # infersim weight dtype -> vLLM --quantization (others need a quantized checkpoint)
KV_CACHE_DTYPES = {"fp8": "fp8", "bf16": "auto", "fp16": "auto"}  # infersim KV dtype -> vLLM --kv-cache-dtype
ROUTER_HINT = {
    "round_robin": "a round-robin load balancer (e.g. a Kubernetes Service)",
    "random": "a random load balancer",
    "least_outstanding": "a least-outstanding-requests balancer (e.g. Envoy LEAST_REQUEST, llm-d's scheduler)",
    "least_kv": "a KV-usage-aware router (e.g. llm-d's kv-cache scorer, vLLM production-stack's router)",
    "prefix_affinity": "a prefix-aware router (e.g. llm-d's prefix-cache scorer, production-stack's prefixaware)",
}


def vllm_args(cfg: EngineConfig, model_id: str | None = None, replicas: int = 1) -> tuple[list[str], list[str]]:
    """(argv of `vllm serve` for one replica of `cfg`, the simulated settings it cannot express).
    `model_id`: the checkpoint to serve (default: the model spec's hf_name, else its name)."""
    model = load_model(cfg.model)
    args = ["vllm", "serve", model_id or model.hf_name or cfg.model,
            "--tensor-parallel-size", str(cfg.layout().attention_tp),
            "--max-num-seqs", str(cfg.max_num_seqs), "--max-num-batched-tokens", str(cfg.max_num_batched_tokens),
            "--block-size", str(cfg.block_size), "--gpu-memory-utilization", f"{cfg.gpu_memory_utilization:g}",
            "--max-model-len", str(cfg.max_model_len or model.max_position_embeddings)]
    missing: list[str] = []
    args += _scheduling(cfg, missing)
    args += _memory(cfg, missing)
    args += _engine_behaviour(cfg, missing)
    args += _speculation(cfg, missing)
    args += _layout(cfg, missing)
    args += _lora(cfg)
    if replicas > 1:
        missing.append(f"router {cfg.router} across {replicas} replicas: `vllm serve` runs one replica; put "
                       f"{ROUTER_HINT[cfg.router]} in front")
    return args, missing


# Every EngineConfig field, by how the launch line treats it (tests/test_launch.py holds the class to it:
# a new field must be placed here, so a setting the plan depends on cannot silently miss the line).
WRITTEN = ("model", "tp", "max_model_len", "max_num_seqs", "max_num_batched_tokens", "block_size",
           "gpu_memory_utilization", "policy", "radix_chunked", "chunk_size", "kv_dtype", "weight_dtype",
           "cpu_cache_gib", "num_gpu_blocks_override", "enforce_eager", "allreduce_kind", "seed", "spec_tokens",
           "spec_method", "spec_draft_model", "pp", "dp", "ep", "enable_expert_parallel", "enable_lora", "max_loras",
           "max_lora_rank", "max_cpu_loras")
LISTED_WHEN_SET = ("router", "radix_ordering", "watermark", "batching_window_s", "preemption_mode", "kv_admission",
                   "swap_space", "num_scheduler_steps", "spec_acceptance", "spec_draft_cost", "enable_dp_attention",
                   "moe_a2a_backend", "deepep_mode", "moe_load_imbalance", "enable_two_batch_overlap",
                   "ep_num_redundant_experts")
NOT_A_SERVER_FLAG = {  # settings of the simulation or of the cluster around the servers, not of one server
    "engine": "the assumed engine names the command itself", "hardware": "where it runs",
    "replicas": "how many commands (the launch's `replicas`)", "replica_hardware": "plan sizes one kind",
    "latency_attribution": "simulation output", "record_steps": "simulation output", "slo": "the judge, not the server",
    "prefill_replicas": "plan sizes aggregated replicas", "decode_replicas": "plan sizes aggregated replicas",
    "prefill": "disaggregated groups: their own lines (plan.json disaggregated.launch)",
    "decode": "disaggregated groups: their own lines (plan.json disaggregated.launch)",
    "kv_transfer_gb_s": "disaggregated only", "kv_transfer_latency_us": "disaggregated only",
    "decode_router": "disaggregated only", "nodes": "the cluster's size (placement), not a server flag",
    "lora_disk_gb_s": "the simulation's assumed disk read speed for adapters (docs/lora.md)",
}


def _lora(cfg: EngineConfig) -> list[str]:
    """vLLM's multi-LoRA flags (docs/lora.md); the adapters themselves are named with --lora-modules."""
    if not cfg.enable_lora:
        return []
    return ["--enable-lora", "--max-loras", str(cfg.max_loras), "--max-lora-rank", str(cfg.max_lora_rank),
            "--max-cpu-loras", str(cfg.cpu_lora_slots)]


def _layout(cfg: EngineConfig, missing: list[str]) -> list[str]:
    """Pipeline stages, data-parallel ranks, expert parallelism and its all-to-all backend under vLLM's
    names. SGLang's DP attention (`enable_dp_attention`: `tp` GPUs split into `dp` attention ranks)
    is vLLM's `--data-parallel-size dp --tensor-parallel-size tp/dp --enable-expert-parallel`: one
    engine core per rank, MoE layers expert-parallel over all of them (the TP size is written by
    vllm_args from the layout's attention TP)."""
    args: list[str] = []
    layout = cfg.layout()
    if cfg.pp > 1:
        args += ["--pipeline-parallel-size", str(cfg.pp)]
    if cfg.dp > 1:
        args += ["--data-parallel-size", str(cfg.dp)]
    if cfg.enable_expert_parallel or cfg.ep is not None:
        args += ["--enable-expert-parallel"]
    if cfg.enable_dp_attention:
        missing.append(f"SGLang's DP attention inside a TP group of {cfg.tp} is written as vLLM's {cfg.dp} "
                       f"data-parallel ranks of TP {layout.attention_tp}: dense (non-MoE) MLP layers run per rank "
                       "in vLLM")
    backend = vllm_all2all_backend(cfg)
    if backend is not None:
        args += ["--all2all-backend", backend]
    elif layout.uses_expert_parallel:
        missing.append(vllm_a2a_gap(cfg))
    if cfg.moe_load_imbalance is not None:
        missing.append(f"expert load imbalance {cfg.moe_load_imbalance:g} (a property of the traffic, not a flag)")
    if cfg.enable_two_batch_overlap:
        missing.append("two-batch overlap (SGLang --enable-two-batch-overlap): no vLLM flag")
    note = vllm_multinode_note(cfg)
    if note is not None:
        missing.append(note)
    if cfg.ep_num_redundant_experts:
        missing.append(f"{cfg.ep_num_redundant_experts} redundant experts: vLLM takes them with --enable-eplb "
                       "(its EPLB config's num_redundant_experts), whose rebalancing is not simulated")
    return args


# vLLM's --all2all-backend (vllm/config/parallel.py, ParallelConfig.all2all_backend; a `vllm serve` flag since
# the VLLM_ALL2ALL_BACKEND environment variable was retired, vLLM PR #33535) for each simulated backend it has.
VLLM_ALL2ALL_DEFAULT = "allgather_reducescatter"  # ParallelConfig.all2all_backend's default
VLLM_ALL2ALL = {("allgather_reducescatter", "auto"): "allgather_reducescatter",
                ("deepep", "normal"): "deepep_high_throughput", ("deepep", "low_latency"): "deepep_low_latency"}


def vllm_all2all_backend(cfg: EngineConfig) -> str | None:
    """vLLM's `--all2all-backend` value for the MoE all-to-all the simulation priced, None where the
    replica has no EP or vLLM has no backend of it (NCCL all-to-all; DeepEP switching kernels by
    batch size, SGLang's `--deepep-mode auto`)."""
    if not cfg.layout().uses_expert_parallel:
        return None
    mode = "auto" if cfg.moe_a2a_backend != "deepep" else cfg.deepep_mode
    return VLLM_ALL2ALL.get((cfg.moe_a2a_backend, mode))


def vllm_a2a_gap(cfg: EngineConfig) -> str:
    """What a vLLM line of an EP replica runs instead of the all-to-all the simulation priced."""
    priced = ("NCCL all-to-all" if cfg.moe_a2a_backend == "nccl"
              else f"{cfg.moe_a2a_backend} ({cfg.deepep_mode}: low-latency kernels on small batches, "
                   "high-throughput above)")
    return (f"MoE all-to-all priced as {priced}: vLLM has no --all2all-backend for it, so this line runs vLLM's "
            f"default {VLLM_ALL2ALL_DEFAULT}, which the simulation did not price (plan with --moe-a2a-backend "
            f"{VLLM_ALL2ALL_DEFAULT} for a line vLLM runs as simulated)")


def _scheduling(cfg: EngineConfig, missing: list[str]) -> list[str]:
    chunked = cfg.policy == "chunked" or (cfg.policy == "radix" and cfg.radix_chunked)
    args = ["--enable-chunked-prefill" if chunked else "--no-enable-chunked-prefill",
            "--enable-prefix-caching" if cfg.policy == "radix" else "--no-enable-prefix-caching"]
    if cfg.chunk_size is not None:
        args += ["--long-prefill-token-threshold", str(cfg.chunk_size)]
    if cfg.policy == "static":
        missing.append("static (request-level) batching: vLLM always batches continuously")
        if cfg.batching_window_s:
            missing.append(f"batching window {cfg.batching_window_s:g} s")
    if cfg.radix_ordering == "lpm":
        missing.append("longest-prefix-first ordering (radix_ordering lpm): vLLM schedules FCFS or by priority")
    if cfg.watermark != EngineConfig.model_fields["watermark"].default:
        missing.append(f"watermark {cfg.watermark:g} (share of KV blocks kept free): no vLLM flag")
    return args


def _memory(cfg: EngineConfig, missing: list[str]) -> list[str]:
    args: list[str] = []
    if cfg.kv_dtype in KV_CACHE_DTYPES:
        args += ["--kv-cache-dtype", KV_CACHE_DTYPES[cfg.kv_dtype]]
    else:
        missing.append(f"KV cache dtype {cfg.kv_dtype}: vLLM's --kv-cache-dtype offers auto and fp8 variants")
    if cfg.weight_dtype in QUANTIZATION_FLAGS:
        args += ["--quantization", QUANTIZATION_FLAGS[cfg.weight_dtype]]
    elif cfg.weight_dtype not in ("bf16", "fp16", AUTO):  # auto: vLLM reads the checkpoint's quantization_config
        missing.append(f"{cfg.weight_dtype} weights: serve a checkpoint quantized to {cfg.weight_dtype} "
                       f"(AWQ/GPTQ/...; vLLM reads the method from it)")
    if cfg.cpu_cache_gib:
        args += ["--kv-offloading-backend", "native", "--kv-offloading-size", f"{cfg.cpu_cache_gib:g}"]
    if cfg.preemption_mode == "swap":
        missing.append(f"swap preemption ({cfg.swap_space:g} GiB per GPU): vLLM V1 preempts by recompute")
    if cfg.kv_admission == "reserve_full":
        missing.append("KV reserved to completion at admission (TensorRT-LLM GUARANTEED_NO_EVICT): vLLM allocates "
                       "blocks as tokens arrive")
    if cfg.num_gpu_blocks_override is not None:
        args += ["--num-gpu-blocks-override", str(cfg.num_gpu_blocks_override)]
    return args


def _engine_behaviour(cfg: EngineConfig, missing: list[str]) -> list[str]:
    args: list[str] = []
    if cfg.enforce_eager:
        args.append("--enforce-eager")
    nccl = cfg.allreduce_kind == "nccl" or (cfg.allreduce_kind is None and cfg.engine is None)  # no preset: NCCL
    if nccl and cfg.tp > 1:
        args.append("--disable-custom-all-reduce")
    if cfg.num_scheduler_steps is not None and cfg.num_scheduler_steps > 1:
        missing.append(f"{cfg.num_scheduler_steps} scheduler steps per schedule: vLLM V1 has no multi-step "
                       f"scheduling")
    if cfg.seed:
        args += ["--seed", str(cfg.seed)]
    return args


def _speculation(cfg: EngineConfig, missing: list[str]) -> list[str]:
    if not cfg.spec_tokens:
        return []
    rates = ",".join(f"{a:g}" for a in cfg.spec_acceptance)
    missing.append(f"speculative acceptance {rates}: assumed by the simulation, a property of the draft and data")
    if cfg.spec_method == "draft" and cfg.spec_draft_model:
        draft = load_model(cfg.spec_draft_model)
        spec = {"model": draft.hf_name or draft.name, "num_speculative_tokens": cfg.spec_tokens}
        return ["--speculative-config", json.dumps(spec, separators=(",", ":"))]
    if cfg.spec_method == "mtp":
        return ["--speculative-config", json.dumps(vllm_mtp_config(cfg), separators=(",", ":"))]
    missing.append(f"speculative heads ({cfg.spec_tokens} tokens): --speculative-config needs the EAGLE heads "
                   f"checkpoint, e.g. '{{\"method\":\"eagle\",\"model\":\"<heads>\",\"num_speculative_tokens\":"
                   f"{cfg.spec_tokens}}}'")
    return []


def vllm_mtp_config(cfg: EngineConfig) -> dict:
    """vLLM's speculative config for the checkpoint's own MTP layers (no separate draft checkpoint:
    vLLM loads them from the target's). Method `mtp`: since vLLM 0.11 the per-family names
    (`deepseek_mtp`, ...) are deprecated aliases that vllm/config/speculative.py rewrites to `mtp`
    with a warning, and the architecture picks its MTP loader; plan reads either spelling."""
    return {"method": "mtp", "num_speculative_tokens": cfg.spec_tokens}
