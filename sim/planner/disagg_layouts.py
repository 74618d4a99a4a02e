"""Prefill and decode layouts chosen separately for a disaggregated cluster (`plan --disagg` with a
layout grid).

A prefill replica only prefills (its speed: prompt tokens per second, its limit: TTFT); a decode
replica only decodes (tokens per second at the batch its TPOT limit allows). So each group takes the
layout whose screen estimate (sim.planner.screen, an estimate, not a bound) gives its work for the
fewest dollars: the prefill group the lowest $ per prefill token/s among layouts whose mean-prompt
prefill is within the TTFT limit, the decode group the lowest $ per decode token/s (ties: fewer
GPUs, then candidate order). The pair is then verified on the whole workload per P:D ratio, as
sim.planner.disagg does for one layout.

Only layouts the simulator runs disaggregated are eligible: plain TP (pp 1, no EP, no DP attention;
sim/layout_config.py refuses the others with disaggregation), so the two groups may differ in TP.
"""

from __future__ import annotations

import math

from sim.config import EngineConfig
from sim.planner.candidates import Candidate
from sim.planner.layouts import LAYOUT_KNOBS
from sim.planner.screen import Estimate


def disagg_eligible(cfg: EngineConfig) -> bool:
    layout = cfg.layout()
    return layout.pp == 1 and layout.is_dense_tp_pp


def _dollars_per(rate: float, c: Candidate) -> float:
    return c.n_gpus * c.cost_per_gpu_hour_usd / rate if rate > 0 else math.inf


def choose_groups(hardware: str, policy: str, estimates: list[tuple[Candidate, Estimate]]) -> dict | None:
    """{"prefill": (candidate, estimate), "decode": (candidate, estimate)} on `hardware` with
    `policy` (module docstring); None when no eligible layout has a finite estimate for a role."""
    mine = [(i, c, e) for i, (c, e) in enumerate(estimates)
            if c.cfg.hardware == hardware and c.cfg.policy == policy and disagg_eligible(c.cfg)]
    prefill = [(i, c, e) for i, c, e in mine if e.prefill_within_ttft]
    decode = [(i, c, e) for i, c, e in mine if e.decode_tok_s > 0]
    if not prefill or not decode:
        return None
    best_prefill = min(prefill, key=lambda t: (_dollars_per(t[2].prefill_tok_s, t[1]), t[1].n_gpus, t[0]))
    best_decode = min(decode, key=lambda t: (_dollars_per(t[2].decode_tok_s, t[1]), t[1].n_gpus, t[0]))
    return {"prefill": best_prefill[1:], "decode": best_decode[1:]}


def split_base(groups: dict) -> EngineConfig:
    """The config a P:D layout of the chosen groups runs from: the decode candidate's settings
    (layout knobs dropped), the prefill group's TP and the decode group's TP as group knobs."""
    prefill, decode = groups["prefill"][0].cfg, groups["decode"][0].cfg
    data = {k: v for k, v in decode.model_dump().items() if k not in LAYOUT_KNOBS}
    data["prefill"] = {**data["prefill"], "tp": prefill.tp}
    data["decode"] = {**data["decode"], "tp": decode.tp}
    return EngineConfig.model_validate(data)


def groups_section(groups: dict) -> dict:
    """plan.json's record of the choice: each group's layout, estimate and $ per token/s."""
    out = {"rule": "per role, the lowest estimated $ per token/s (an estimate, not a bound); plain-TP layouts only "
                   "(the simulator runs no other layout disaggregated)"}
    for role, rate_key in (("prefill", "prefill_tok_s"), ("decode", "decode_tok_s")):
        c, e = groups[role]
        out[role] = {"candidate": c.label, "tp": c.cfg.tp, "gpus_per_replica": c.n_gpus,
                     "estimated_tok_s_per_replica": getattr(e, rate_key),
                     "estimated_usd_per_hour_per_tok_s": _dollars_per(getattr(e, rate_key), c)}
    return out
