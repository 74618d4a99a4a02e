"""The one engine every planning path simulates when none is named: `plan`, `pool plan`, `day` and the
capacity-planning notebook read it here, so a plan never prices the generic engine under a vLLM line
because one path forgot to ask for the preset.

`DEFAULT_ENGINE` is the bare family name, which resolves to its newest bundled preset (`vllm` ->
`vllm@0.15`, sim/inputs/engines/preset.py); `none` names the generic engine (no preset: the hardware
profile's `step_overhead_us`, NCCL all-reduce), the planner's engine of before.
"""

from __future__ import annotations

DEFAULT_ENGINE = "vllm"  # the newest bundled vLLM preset (`infersim engines`)
NO_ENGINE = "none"  # the generic engine: no preset


def engine_or_default(value) -> str | None:
    """An `engine` as the planning paths read it: absent (None) -> DEFAULT_ENGINE; `none` -> None (the
    generic engine); anything else (a family, `family@version`, a preset YAML path) as given."""
    if value is None:
        return DEFAULT_ENGINE
    text = str(value).strip()
    return None if text.lower() == NO_ENGINE else text


def with_default_engine(data: dict) -> dict:
    """Config keys (a YAML's `engine:` mapping, a pool entry's) with `engine` read by engine_or_default."""
    return {**data, "engine": engine_or_default(data.get("engine"))}
