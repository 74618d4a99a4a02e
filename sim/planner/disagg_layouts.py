"""Prefill and decode layouts chosen separately for a disaggregated cluster (`plan --disagg` with a
layout grid).

A prefill replica only prefills (its speed: prompt tokens per second, its limit: TTFT); a decode
replica only decodes (tokens per second at the batch its TPOT limit allows). So each group takes the
layout whose screen estimate (sim.planner.screen, an estimate, not a bound) gives its work for the
fewest dollars: the prefill group the lowest $ per prefill token/s among layouts whose mean-prompt
prefill is within the TTFT limit, the decode group the lowest $ per decode token/s (ties: fewer
GPUs, then candidate order). The pair is then verified on the whole workload per P:D ratio, as
sim.planner.disagg does for one layout.

Every layout of the grid the simulator runs disaggregated is eligible: TP, expert parallel and
data-parallel attention (each group's ranks in lockstep with their own KV, sim/engine/disagg/build.py), not
PP (refused with disaggregation).
Under `deepep` a group runs the kernels SGLang's `auto` picks for its role (normal on prefill,
low-latency on decode); the estimates are the aggregated candidates' (sim.planner.screen), whose
`auto` picks kernels by tokens per GPU: for a prefill step or a small decode batch the same kernels.
"""

from __future__ import annotations

import math

from sim.inputs.config import EngineConfig
from sim.planner.candidates import Candidate
from sim.planner.layouts import LAYOUT_KNOBS, layout_label
from sim.planner.screen import Estimate

GROUP_KNOBS = ("tp", *(k for k in LAYOUT_KNOBS if k != "pp"))  # what a group takes of its candidate's layout


def disagg_eligible(cfg: EngineConfig) -> bool:
    """Whether `cfg`'s layout runs as a disaggregated group: any but PP (the candidates are already
    layouts the simulator runs, so EP with speculative decoding never gets here)."""
    return cfg.layout().pp == 1


def _dollars_per(rate: float, c: Candidate) -> float:
    return c.n_gpus * c.cost_per_gpu_hour_usd / rate if rate > 0 else math.inf


def choose_groups(hardware: str, policy: str, estimates: list[tuple[Candidate, Estimate]]) -> dict | None:
    """{"prefill": (candidate, estimate), "decode": (candidate, estimate)} on `hardware` with
    `policy` (module docstring); None when no eligible layout has a finite estimate for a role."""
    mine = [(i, c, e) for i, (c, e) in enumerate(estimates) if c.cfg.hardware == hardware and c.cfg.policy == policy]
    mine = [(i, c, e) for i, c, e in mine if disagg_eligible(c.cfg)]
    prefill = [(i, c, e) for i, c, e in mine if e.prefill_within_ttft]
    decode = [(i, c, e) for i, c, e in mine if e.decode_tok_s > 0]
    if not prefill or not decode:
        return None
    best_prefill = min(prefill, key=lambda t: (_dollars_per(t[2].prefill_tok_s, t[1]), t[1].n_gpus, t[0]))
    best_decode = min(decode, key=lambda t: (_dollars_per(t[2].decode_tok_s, t[1]), t[1].n_gpus, t[0]))
    return {"prefill": best_prefill[1:], "decode": best_decode[1:]}


def split_base(groups: dict) -> EngineConfig:
    """The config a P:D layout of the chosen groups runs from: the decode candidate's settings
    (layout knobs dropped), each group's layout (TP, DP ranks, EP, all-to-all backend) as its
    group knobs."""
    prefill, decode = groups["prefill"][0].cfg, groups["decode"][0].cfg
    data = {k: v for k, v in decode.model_dump().items() if k not in LAYOUT_KNOBS}
    for role, own in (("prefill", prefill), ("decode", decode)):
        data[role] = {**data[role], **{k: getattr(own, k) for k in GROUP_KNOBS}}
    return EngineConfig.model_validate(data)


def groups_section(groups: dict) -> dict:
    """plan.json's record of the choice: each group's layout, estimate and $ per token/s."""
    out = {"rule": "per role, the lowest estimated $ per token/s (an estimate, not a bound) over the TP, EP and "
                   "DP-attention layouts (no PP: not simulated with disaggregation)"}
    for role, rate_key in (("prefill", "prefill_tok_s"), ("decode", "decode_tok_s")):
        c, e = groups[role]
        out[role] = {"candidate": c.label, "layout": layout_label(c.cfg), "tp": c.cfg.tp, "gpus_per_replica": c.n_gpus,
                     "estimated_tok_s_per_replica": getattr(e, rate_key),
                     "estimated_usd_per_hour_per_tok_s": _dollars_per(getattr(e, rate_key), c)}
    return out
