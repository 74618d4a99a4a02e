"""`plan`'s defaults and vLLM spellings: the engine and policies a plan assumes when none is named,
which of two candidates that replay alike it keeps, the weights it reports, and the vLLM flags it
prints (`--quantization`, `--speculative-config`, `--enable-expert-parallel`) read back with the
meaning of infersim's own (sim/inputs/vllm_names.py does the translation)."""

from __future__ import annotations

from pathlib import Path

from sim.errors import InputError
from sim.inputs.engines.default import DEFAULT_ENGINE, NO_ENGINE, engine_or_default

__all__ = ["DEFAULT_ENGINE", "NO_ENGINE"]  # one default for every planning path: sim/inputs/engines/default.py


def plan_engine(engine: str | None, config: Path | None) -> str | None:
    """The engine preset `plan` simulates: --engine as given (`none`: no preset), else the --config
    YAML's `engine`, else DEFAULT_ENGINE, so the launch line it prints is the engine it simulated."""
    if engine is not None:
        return engine_or_default(engine)
    if config is not None:
        from sim.yamlio import read_mapping

        if "engine" in read_mapping(config):
            return None  # the YAML's own (load_config reads it)
    return DEFAULT_ENGINE


NO_ENGINE_POLICIES = "chunked,radix"  # without a preset: chunked prefill with and without prefix caching


def default_policies(engine: str | None, config: Path | None) -> str:
    """`plan`'s policies when --policy is not given: the engine preset's default policy (the engine named,
    else the --config YAML's), so the default plan is the engine as it ships; NO_ENGINE_POLICIES
    without a preset."""
    if engine is None and config is not None:
        from sim.yamlio import read_mapping

        engine = read_mapping(config).get("engine")
    if not engine:
        return NO_ENGINE_POLICIES
    from sim.inputs.engines.preset import load_engine

    return load_engine(str(engine)).scheduling.policy


def plan_policies(engine: str | None) -> list[str]:
    """The policies `plan` searches by default for `engine` (as engine_or_default read it), as a list."""
    return [p.strip() for p in default_policies(engine, None).split(",")]


def vllm_spellings(model: str | None, config: Path | None, weight_dtype: str | None, quantization: str | None,
                   speculative_config: str | None) -> dict:
    """Config keys for vLLM's `--quantization` and `--speculative-config` (None-free); `--quantization`
    together with `--weight-dtype` is an InputError (two names for one setting)."""
    from sim.inputs.vllm_names import speculative_config_knobs, weight_dtype_from_quantization

    out: dict = {}
    if quantization is not None:
        if weight_dtype is not None:
            raise InputError("--quantization", None, "names the weight dtype as --weight-dtype does: give one of them")
        out["weight_dtype"] = weight_dtype_from_quantization(quantization, _model_spec(model, config))
    if speculative_config is not None:
        out.update(speculative_config_knobs(speculative_config))
    return out


def _model_spec(model: str | None, config: Path | None):
    from sim.inputs.config import EngineConfig
    from sim.inputs.model import load_model
    from sim.yamlio import read_mapping

    name = model or (read_mapping(config).get("model") if config is not None else None)
    return load_model(str(name or EngineConfig.model_fields["model"].default))


def expert_parallel_flag(ep: str | None, enable_expert_parallel: bool) -> str:
    """`--ep`'s value for vLLM's `--enable-expert-parallel` (on) / `--no-...` (off); both flags
    naming different things is an InputError."""
    value = "on" if enable_expert_parallel else "off"
    if ep is not None and ep.strip().lower() != value:
        raise InputError("--enable-expert-parallel", None, f"contradicts --ep {ep}: give one of them")
    return value


def preferred_policy(base) -> str:
    """Which of a chunked / radix pair that replays alike is sized: the engine preset's default policy
    when it is radix (vLLM, SGLang: prefix caching on), else chunked."""
    if base.engine is None:
        return "chunked"
    from sim.inputs.engines.preset import load_engine

    return "radix" if load_engine(base.engine).scheduling.policy == "radix" else "chunked"


def weights_section(base) -> dict:
    """plan.json's `weight_dtype`: the dtype every candidate's weights were sized and priced in, and per
    tensor group in words (sim.inputs.model.weights: `auto` is the checkpoint as stored)."""
    from sim.inputs.model import load_model
    from sim.inputs.model.weights import describe_weight_dtype

    return {"value": base.weight_dtype, "described": describe_weight_dtype(load_model(base.model), base.weight_dtype)}
