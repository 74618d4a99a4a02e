"""Per-group flags of a disaggregated cluster (`simulate`, `disagg`): `--prefill-*` / `--decode-*`,
each the group's own value of the run's knob of the same name (`--prefill-tp 32 --prefill-dp 32
--prefill-enable-dp-attention --prefill-ep 32`; YAML `prefill: {tp: 32, dp: 32, ...}`).

`with_group_flags` adds them to a typer command in one place: the command declares a `group_knobs`
keyword and receives `{"prefill": {...}, "decode": {...}}` with only the keys given on the line."""

from __future__ import annotations

import functools
import inspect

import typer

ROLES = ("prefill", "decode")
GROUP_KEY_TYPES = {"hardware": str, "tp": int, "policy": str, "dp": int, "ep": int, "enable_dp_attention": bool,
                   "enable_expert_parallel": bool, "moe_a2a_backend": str, "deepep_mode": str,
                   "ep_num_redundant_experts": int, "enable_two_batch_overlap": bool}
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


def _group_parameters() -> list[inspect.Parameter]:
    return [inspect.Parameter(f"{role}_{key}", inspect.Parameter.KEYWORD_ONLY, default=group_option(role, key),
                              annotation=kind)
            for role in ROLES for key, kind in GROUP_KEY_TYPES.items()]


def with_group_flags(command):
    """`command` with the `--prefill-*` / `--decode-*` options added to what typer reads (its signature),
    called with them nested as `group_knobs` ({role: {key: value}}, the keys given only)."""
    own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name != "group_knobs"]
    added = _group_parameters()
    flat_names = [p.name for p in added]

    @functools.wraps(command)
    def with_groups(**kwargs):
        flat = {name: kwargs.pop(name, None) for name in flat_names}
        return command(**kwargs, group_knobs=nest_group_knobs(flat))

    with_groups.__signature__ = inspect.Signature([*own, *added])
    with_groups.__annotations__ = {p.name: p.annotation for p in (*own, *added)}
    return with_groups


def nest_group_knobs(flat: dict) -> dict:
    """`{"prefill_tp": 2, ...}` -> `{"prefill": {"tp": 2}}` (roles with no key given left out)."""
    nested = {}
    for role in ROLES:
        knobs = {key: flat.get(f"{role}_{key}") for key in GROUP_KEY_TYPES}
        knobs = {k: v for k, v in knobs.items() if v is not None}
        if knobs:
            nested[role] = knobs
    return nested
