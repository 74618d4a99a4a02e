"""CLI commands about what is bundled and what one replica costs: profiles, models, memory, roofline."""

from __future__ import annotations

import math

import typer

from sim.cli.common import print_json, print_table
from sim.cost.expert_parallel import expert_parallelism_of
from sim.cost.replica import replica_cost_model
from sim.errors import InputError
from sim.inputs.config import MAX_NUM_SEQS, load_config
from sim.inputs.dtypes import bytes_per_element
from sim.inputs.hardware import bundled_profiles, load_hardware
from sim.inputs.layout.checks import simulated_layout
from sim.inputs.layout.layout_memory import plan_layout_memory
from sim.inputs.model import bundled_models, load_model
from sim.inputs.model.kv import kv_elements_per_token
from sim.inputs.model.params import active_params, total_params
from sim.schema import MAX_TOKENS

ModelOpt = typer.Option("llama-3-8b", "--model", "-m", help="bundled model name or a YAML / config.json path")
HardwareOpt = typer.Option("h100-sxm", "--hardware", "-H", help="bundled profile name or a YAML path")
JsonOpt = typer.Option(False, "--json", help="machine-readable output")


def profiles(as_json: bool = JsonOpt) -> None:
    """List the bundled hardware profiles."""
    rows = []
    for name in bundled_profiles():
        hw = load_hardware(name)
        rows.append({
            "name": name, "description": hw.description, "hbm_gib": hw.memory.hbm_capacity_gib,
            "hbm_bandwidth_gb_s": hw.memory.hbm_bandwidth_gb_s, "dense_bf16_tflops": hw.compute.dense_bf16_tflops,
            "dense_fp8_tflops": hw.compute.dense_fp8_tflops, "cost_per_hour_usd": hw.cost_per_hour_usd,
        })
    if as_json:
        print_json(rows)
        return
    columns = list(rows[0]) if rows else ["name"]
    print_table("Hardware profiles", columns, [[r[c] for c in columns] for r in rows])


def models(specs: list[str] = typer.Argument(None, show_default=False,
                                             help="model names or YAML / HF config.json paths (default: every "
                                                  "bundled spec)"),
           as_json: bool = JsonOpt) -> None:
    """List the bundled model specs, or the given ones (names, YAML or HF config.json paths)."""
    rows = []
    for name in specs or bundled_models():
        if not name.endswith((".yaml", ".yml", ".json")) and name not in bundled_models():
            raise InputError("models", name, f"unknown model; give a bundled name ({', '.join(bundled_models())}) "
                                             "or a YAML / config.json path")
        m = load_model(name)
        rows.append({
            "name": name, "layers": m.n_layers, "hidden": m.hidden_size, "heads": m.n_heads,
            "kv_heads": m.n_kv_heads, "params_b": round(total_params(m) / 1e9, 2),
            "active_params_b": round(active_params(m) / 1e9, 2),
            "kv_bytes_per_token_bf16": math.ceil(kv_elements_per_token(m) * bytes_per_element("bf16")),
            "attention": m.attention_label,
        })
    if as_json:
        print_json(rows)
        return
    columns = list(rows[0]) if rows else ["name"]
    print_table("Model specs", columns, [[r[c] for c in columns] for r in rows])


def memory(
    model: str = ModelOpt,
    hardware: str = HardwareOpt,
    tp: int = typer.Option(1, "--tp"),
    block_size: int = typer.Option(16, "--block-size"),
    gpu_memory_utilization: float = typer.Option(0.9, "--gpu-memory-utilization"),
    weight_dtype: str = typer.Option(None, "--weight-dtype", show_default=False,
                                     help="bf16 | fp8 | int4 | nvfp4 | mxfp4 | auto ... [auto: as stored]"),
    kv_dtype: str = typer.Option("bf16", "--kv-dtype"),
    max_num_batched_tokens: int = typer.Option(8192, "--max-num-batched-tokens"),
    max_num_seqs: int = typer.Option(256, "--max-num-seqs"),
    context: int | None = typer.Option(None, "--context", help="also: KV bytes one sequence of this many tokens "
                                                               "holds per GPU (windowed layers keep their window)"),
    pp: int = typer.Option(1, "--pp", "--pipeline-parallel-size", "--pp-size"),
    dp: int = typer.Option(1, "--dp", "--data-parallel-size"),
    ep: int = typer.Option(None, "--ep", "--expert-parallel-size", show_default=False),
    enable_expert_parallel: bool = typer.Option(False, "--enable-expert-parallel"),
    enable_dp_attention: bool = typer.Option(False, "--enable-dp-attention"),
    ep_num_redundant_experts: int = typer.Option(0, "--ep-num-redundant-experts", "--num-redundant-experts"),
    as_json: bool = JsonOpt,
) -> None:
    """Weights per GPU, KV bytes per token and KV blocks per replica (per attention rank, with --dp)."""
    cfg = load_config(None, {
        "model": model, "hardware": hardware, "tp": tp, "block_size": block_size,
        "gpu_memory_utilization": gpu_memory_utilization, "weight_dtype": weight_dtype, "kv_dtype": kv_dtype,
        "max_num_batched_tokens": max_num_batched_tokens, "max_num_seqs": max_num_seqs, "pp": pp, "dp": dp,
        "ep": ep, "enable_expert_parallel": enable_expert_parallel, "enable_dp_attention": enable_dp_attention,
        "ep_num_redundant_experts": ep_num_redundant_experts,
    })  # the same checks as simulate
    spec = load_model(cfg.model)
    layout = cfg.layout().check(spec.n_layers, spec.moe is not None, spec.n_experts if spec.moe else None)
    plan = plan_layout_memory(
        spec, load_hardware(cfg.hardware), layout, cfg.block_size, cfg.gpu_memory_utilization,
        cfg.weight_dtype, cfg.kv_dtype, cfg.max_num_batched_tokens, cfg.max_num_seqs,
    )
    data = plan.to_dict()
    if context is not None:
        data.update(_sequence_kv(load_model(cfg.model), cfg.tp, cfg.kv_dtype, cfg.block_size, context))
    if not layout.is_dense_tp_pp or layout.pp > 1:  # the layout's own numbers (plain TP: unchanged output)
        data.update(n_gpus_per_replica=layout.n_gpus, n_kv_ranks=layout.n_kv_ranks,
                    num_gpu_blocks_per_replica=plan.num_gpu_blocks * layout.n_kv_ranks)
    if as_json:
        print_json(data)
        return
    rows = [[k, _shown(k, v)] for k, v in data.items() if v is not None]
    print_table(f"Memory plan: {model} on {tp} x {hardware}", ["quantity", "value"], rows)


def _sequence_kv(model, tp: int, kv_dtype: str, block_size: int, context: int) -> dict:
    """KV one sequence of `context` tokens holds per GPU, and the figure if every layer were full attention."""
    from sim.inputs.dtypes import kv_bytes_per_element
    from sim.inputs.model.kv import kv_bytes_per_sequence

    if not 1 <= context <= MAX_TOKENS:
        raise InputError("--context", None, f"must be a whole number in [1, {MAX_TOKENS}]; got {context}")
    el = kv_bytes_per_element(kv_dtype, "--kv-dtype")
    all_full = model.model_copy(update={"layer_attention": None, "window_tokens": None})
    return {"context_tokens": context,
            "kv_bytes_per_sequence_per_gpu": kv_bytes_per_sequence(model, context, el, block_size, tp),
            "kv_bytes_per_sequence_all_full_attention_per_gpu": kv_bytes_per_sequence(all_full, context, el,
                                                                                       block_size, tp)}


def _shown(key: str, value) -> str:
    """Byte counts in the unit they reach (`68.6 KiB` of MLA KV per token, not `0.00 GiB`)."""
    from sim.run.human_units import bytes_text

    if isinstance(value, dict):
        return ", ".join(f"{group} {bytes_text(v)}" for group, v in value.items() if v)
    return bytes_text(value) if "bytes" in key else str(value)


def roofline(
    model: str = ModelOpt,
    hardware: str = HardwareOpt,
    tp: int = typer.Option(1, "--tp"),
    prefill_tokens: int = typer.Option(4096, "--prefill-tokens", help="tokens of one prefill"),
    batch: int = typer.Option(1, "--batch", help="sequences in the decode step"),
    context: int = typer.Option(1024, "--context", help="cached tokens per decoding sequence"),
    block_size: int = typer.Option(16, "--block-size"),
    weight_dtype: str = typer.Option(None, "--weight-dtype", show_default=False,
                                     help="bf16 | fp8 | int4 | nvfp4 | mxfp4 | auto ... [auto: as stored]"),
    kv_dtype: str = typer.Option("bf16", "--kv-dtype"),
    pp: int = typer.Option(1, "--pp", "--pipeline-parallel-size", "--pp-size", help="pipeline stages"),
    dp: int = typer.Option(1, "--dp", "--data-parallel-size", help="attention data-parallel ranks (MoE)"),
    ep: int = typer.Option(None, "--ep", "--expert-parallel-size", show_default=False),
    enable_expert_parallel: bool = typer.Option(False, "--enable-expert-parallel"),
    enable_dp_attention: bool = typer.Option(False, "--enable-dp-attention"),
    moe_a2a_backend: str = typer.Option("nccl", "--moe-a2a-backend", help="nccl | deepep | allgather_reducescatter"),
    deepep_mode: str = typer.Option("auto", "--deepep-mode", help="auto | normal | low_latency"),
    as_json: bool = JsonOpt,
) -> None:
    """Per-op roofline of one prefill and one decode step (with --pp: the busiest stage's ops over the
    step's micro-batches, pp_send_recv and pp_bubble; with --ep / --dp: one attention rank's step, its
    MoE layers on all ranks' tokens with moe_dispatch / moe_combine; see docs/parallelism.md)."""
    limits = (("--prefill-tokens", prefill_tokens, 1, MAX_TOKENS), ("--batch", batch, 1, MAX_NUM_SEQS),
              ("--context", context, 0, MAX_TOKENS))
    for name, value, low, high in limits:
        if not low <= value <= high:
            raise InputError(name, None, f"must be a whole number in [{low}, {high}]; got {value}")
    cfg = load_config(None, {"model": model, "hardware": hardware, "tp": tp, "block_size": block_size,
                             "weight_dtype": weight_dtype, "kv_dtype": kv_dtype, "pp": pp, "dp": dp, "ep": ep,
                             "enable_expert_parallel": enable_expert_parallel,
                             "enable_dp_attention": enable_dp_attention, "moe_a2a_backend": moe_a2a_backend,
                             "deepep_mode": deepep_mode})  # simulate's checks
    spec = load_model(cfg.model)
    layout = simulated_layout(cfg, spec)
    cost = replica_cost_model(spec, load_hardware(cfg.hardware), cfg.tp, cfg.weight_dtype, cfg.kv_dtype,
                              cfg.block_size, pp=cfg.pp, layout=layout,
                              expert_parallel=expert_parallelism_of(cfg, spec, layout))
    steps = {
        "prefill": cost.breakdown([prefill_tokens], [0], n_sampled=1),
        "decode": cost.breakdown([1] * batch, [context] * batch),
    }
    data = {
        kind: {
            "time_s": step.time_s, "bound": step.bound, "overhead_s": step.overhead_s, "n_layers": step.n_layers,
            "ops": [
                {"name": op.name, "time_s": op.time_s * (step.n_layers if op.per_layer else 1),
                 "flops": op.flops * (step.n_layers if op.per_layer else 1),
                 "bytes": op.bytes * (step.n_layers if op.per_layer else 1), "bound": op.bound}
                for op in step.ops
            ],
        }
        for kind, step in steps.items()
    }
    if as_json:
        print_json(data)
        return
    for kind, step in data.items():
        rows = [[o["name"], f"{o['time_s'] * 1e3:.3f}", f"{o['flops'] / 1e12:.3f}", f"{o['bytes'] / 1e9:.3f}",
                 o["bound"]] for o in step["ops"]]
        rows.append(["step overhead", f"{step['overhead_s'] * 1e3:.3f}", "", "", ""])
        title = f"{kind}: {step['time_s'] * 1e3:.3f} ms, {step['bound']}-bound (all {step['n_layers']} layers)"
        print_table(title, ["op", "time_ms", "TFLOP", "GB", "bound"], rows)
