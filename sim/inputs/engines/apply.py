"""Merging an engine preset into a config: explicit keys win, the preset fills the rest."""

from __future__ import annotations

from sim.inputs.dtypes import is_quantized

PRESET_KEYS = ("policy", "max_num_seqs", "max_num_batched_tokens", "chunk_size", "block_size", "preemption_mode",
               "kv_admission", "radix_ordering", "gpu_memory_utilization")


def fill_from_preset(data: dict) -> dict:
    """`data` (config keys given explicitly) with every preset-controlled key it lacks taken from
    the preset named by `data["engine"]`. The KV dtype default depends on the weight dtype: a
    quantized checkpoint gets the preset's `kv.dtype_quantized_checkpoint`. Keys that do not apply
    to the effective policy are not filled (a preset's chunk size does not leak into `continuous`), and
    the preset's chunk size is capped at an explicit, smaller step budget."""
    name = data.get("engine")
    if not name:
        return data
    from sim.inputs.engines.preset import load_engine

    preset = load_engine(str(name))
    filled = dict(data)
    defaults = preset.scheduling.model_dump()
    defaults.update(_large_gpu_defaults(preset, data))
    defaults.update(_memory_tier_defaults(preset, data))
    policy = filled.get("policy", defaults["policy"])
    for key in PRESET_KEYS:
        if key in filled or defaults.get(key) is None:
            continue
        chunked = policy in ("chunked", "radix")
        if (key == "chunk_size" and not chunked) or (key == "radix_ordering" and policy != "radix"):
            continue
        filled[key] = defaults[key]
        if key == "chunk_size" and filled.get("max_num_batched_tokens") is not None:  # the chunk fits the budget
            filled[key] = min(filled[key], int(filled["max_num_batched_tokens"]))
    if "kv_dtype" not in filled:
        weight = str(filled.get("weight_dtype", "bf16"))
        filled["kv_dtype"] = preset.kv.dtype_quantized_checkpoint if is_quantized(weight) else preset.kv.dtype
    return filled


def _first_hardware(data: dict):
    """The run's (first) hardware profile, or None when it cannot be read (the config's own validation
    then names it)."""
    from sim.errors import InputError
    from sim.inputs.hardware import load_hardware

    hardware = (data.get("replica_hardware") or [data.get("hardware") or "h100-sxm"])[0]
    try:
        return load_hardware(str(hardware))
    except (InputError, OSError):
        return None


def _memory_tier_defaults(preset, data: dict) -> dict:
    """The prompt chunk SGLang 0.5 picks by GPU memory (`gpu_memory_tiers`), divided over the attention-DP
    ranks where the engine does (`dp_attention_divides_chunk`: each rank's scheduler takes chunk // dp)."""
    from sim.inputs.engines.preset_rules import gpu_memory_tier

    hw = _first_hardware(data) if preset.gpu_memory_tiers else None
    tier = None if hw is None else gpu_memory_tier(preset.gpu_memory_tiers, hw.memory.hbm_capacity_gib)
    if tier is None:
        return {}
    chunk = int(data.get("chunk_size") or tier.chunk_size)
    dp = int(data.get("dp") or 1)
    ranks = dp if data.get("enable_dp_attention") and dp > 1 else 1
    out = {"chunk_size": max(chunk // ranks, 1) if preset.dp_attention_divides_chunk else chunk}
    rule = preset.mem_fraction_rule
    if rule is not None:
        tp = int(data.get("tp") or 1)
        speculative = str(data.get("spec_method") or "heads") if data.get("spec_tokens") else None
        out["gpu_memory_utilization"] = rule.fraction(hw.memory.hbm_capacity_gib, chunk, tier.graph_max_bs(tp), tp,
                                                      int(data.get("pp") or 1), ranks, speculative)
    return out


def _large_gpu_defaults(preset, data: dict) -> dict:
    """The preset's big-GPU budgets when the run's (first) profile qualifies (vLLM >= 0.9.1 picks
    1024 seqs / 8192 tokens on >= 70 GiB GPUs except A100); {} otherwise or when the profile cannot
    be read (the config's own validation then names it)."""
    rule = preset.large_gpu_scheduling
    if rule is None:
        return {}
    hw = _first_hardware(data)
    if hw is None or not rule.applies(hw):
        return {}
    return {"max_num_seqs": rule.max_num_seqs, "max_num_batched_tokens": rule.max_num_batched_tokens}


def fit_inherited_to_policy(data: dict, own: dict) -> dict:
    """`data` (a whole config, e.g. a run's config with one candidate's or group's `own` keys on top)
    without the inherited knobs that `own`'s policy does not take: a radix-only ordering or host tier
    on another policy, a chunk size on a policy without chunks; an inherited chunk size is capped at
    the token budget. Keys in `own` stay as given (the config then judges them)."""
    data = dict(data)
    if "policy" in own and own["policy"] != "radix":
        data.update({key: value for key, value in (("radix_ordering", "fcfs"), ("cpu_cache_gib", 0.0))
                     if key not in own})
    if "chunk_size" not in own and data.get("chunk_size") is not None:
        if data.get("policy") not in ("chunked", "radix"):
            data["chunk_size"] = None
        elif data.get("max_num_batched_tokens") is not None:
            data["chunk_size"] = min(data["chunk_size"], data["max_num_batched_tokens"])
    return data


def effective_settings(cfg) -> dict | None:
    """What the run used, for summary.json: the engine with its overhead terms after flag
    overrides, and every knob a preset can set, as finally resolved (None without a preset)."""
    from sim.inputs.engines.overhead import EngineOverhead
    from sim.inputs.engines.preset import load_engine

    if cfg.engine is None:
        return None
    knobs = {key: getattr(cfg, key) for key in PRESET_KEYS}
    knobs.update(weight_dtype=cfg.weight_dtype, kv_dtype=cfg.kv_dtype)
    preset = load_engine(cfg.engine)
    over = EngineOverhead.for_run(preset, cfg)
    return {
        "engine": preset.name, "engine_version": f"{preset.engine} {preset.version}",
        "engine_version_range": preset.version_range, "async_scheduling": over.async_scheduling,
        "allreduce_kind": cfg.allreduce_kind or preset.allreduce_kind, **knobs,
        "cuda_graph_capture_sizes": list(over.capture_sizes), "cuda_graph_scope": over.graph_scope,
        "overhead": {"per_step_us": over.per_step_s * 1e6, "per_seq_us": over.per_seq_s * 1e6,
                     "per_token_us": over.per_token_s * 1e6, "overlap": over.overlap,
                     "residue_us": over.residue_s * 1e6, "num_scheduler_steps": over.num_scheduler_steps,
                     "frontend_ms": over.frontend_s * 1e3,
                     "tokenize_us_per_token": over.tokenize_s_per_token * 1e6},
    }
