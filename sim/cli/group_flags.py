"""Per-group flags of a disaggregated cluster (`simulate`, `disagg`): `--prefill-*` / `--decode-*`,
each the group's own value of the run's knob of the same name (`--prefill-tp 32 --prefill-dp 32
--prefill-enable-dp-attention --prefill-ep 32`; YAML `prefill: {tp: 32, dp: 32, ...}`)."""

from __future__ import annotations

import typer

GROUP_KEYS = ("hardware", "tp", "policy", "dp", "ep", "enable_dp_attention", "enable_expert_parallel",
              "moe_a2a_backend", "deepep_mode", "ep_num_redundant_experts", "enable_two_batch_overlap")
_HELP = {"hardware": "profile", "tp": "TP (SGLang --tp: the replica's GPUs under DP attention)",
         "policy": "policy", "dp": "attention data-parallel ranks", "ep": "expert-parallel size",
         "moe_a2a_backend": "EP all-to-all: nccl | deepep", "deepep_mode": "deepep kernels [auto: normal on prefill, "
         "low_latency on decode, as SGLang's auto]", "ep_num_redundant_experts": "redundant expert copies"}
_SWITCH_HELP = {"enable_dp_attention": "SGLang: --dp attention ranks inside --tp",
                "enable_expert_parallel": "vLLM: experts sharded over dp x tp",
                "enable_two_batch_overlap": "EP: all-to-alls hidden behind the other micro-batch"}


def group_option(role: str, key: str):
    """The typer option `--{role}-{key}` (default None: the run's value)."""
    flag = f"--{role}-{key.replace('_', '-')}"
    if key in _SWITCH_HELP:
        return typer.Option(None, flag, show_default=False, help=f"disaggregated: {role} group, {_SWITCH_HELP[key]}")
    return typer.Option(None, flag, show_default=False, help=f"disaggregated: {role} group's {_HELP[key]}")


def pop_group_knobs(overrides: dict) -> None:
    """`prefill_tp=...` style overrides -> `prefill: {tp: ...}` (the keys given only)."""
    for role in ("prefill", "decode"):
        knobs = {key: overrides.pop(f"{role}_{key}", None) for key in GROUP_KEYS}
        knobs = {k: v for k, v in knobs.items() if v is not None}
        if knobs:
            overrides[role] = knobs
