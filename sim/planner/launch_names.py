"""Which engine, at which version, a launch line was simulated with: the comment line printed above
every launch line infersim writes (plan, pool plan, the disaggregated groups, the k8s manifests), so a
line never reaches a terminal without saying what it was derived from.

`# infersim simulated: vLLM 0.15 (V1 engine core, async scheduling), preset vllm@0.15` for a line of the
engine that was simulated; a line under another engine's flags (plan prints vLLM's and SGLang's
spelling of every layout) says that it was not simulated on that engine; `--engine none` says the
generic engine (no preset: the hardware profile's step overhead) with vLLM's names for its knobs.
"""

from __future__ import annotations

ENGINE_TITLES = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM", "lmdeploy": "LMDeploy"}
GENERIC_ENGINE = "the generic engine (--engine none: no engine preset, the hardware profile's step overhead)"
COMMENT = "# infersim simulated: "


def simulated_engine(cfg) -> str:
    """'vLLM 0.15 (V1 engine core, async scheduling), preset vllm@0.15', or the generic engine."""
    if getattr(cfg, "engine", None) is None:
        return GENERIC_ENGINE
    from sim.inputs.engines.preset import load_engine

    preset = load_engine(cfg.engine)
    return f"{preset.engine} {preset.version}, preset {preset.name}"


def simulated_family(cfg) -> str | None:
    """The family (`vllm`) of the preset the simulation ran, None for the generic engine."""
    if getattr(cfg, "engine", None) is None:
        return None
    from sim.inputs.engines.preset import load_engine

    return load_engine(cfg.engine).family


def simulated_comment(cfg, line_engine: str, notes: list[str] | None = None) -> str:
    """The comment line above a `line_engine` launch line of `cfg`: the engine and version simulated,
    whether this line is that engine's, and `notes` (what the line runs that was not simulated)."""
    title = ENGINE_TITLES.get(line_engine, line_engine)
    parts = [COMMENT + simulated_engine(cfg)]
    family = simulated_family(cfg)
    if family is None:
        parts.append(f"the line names its knobs with {title}'s flags")
    elif family != line_engine:
        parts.append(f"this {title} line carries the same knobs under {title}'s flags; not simulated on {title}")
    return "; ".join(parts + list(notes or []))
