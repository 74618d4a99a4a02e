"""A cheap first look at many candidates: an analytic ESTIMATE of each replica's capacity from the
roofline step cost, used to choose which candidates get the rate search and the whole-trace
verification. It is an estimate, NOT a bound: a candidate it drops is not proven dearer, and the
plan says so (`screen.exact_over`: "sized candidates only" whenever it dropped one).

The estimate, per attention rank (sim/cost/expert_parallel.py prices one rank's view), with the
candidate's own memory plan and cost model (the ones the simulation builds, sim.run.simulate):
- steady state of a chunked-prefill engine: every step carries B decodes (each at mean prompt +
  half the output cached) and the prompt tokens that arrive meanwhile, B x prompt / output of them
  (within max_num_batched_tokens), so prefill slows every decode as it does in the simulation (and,
  under DP attention, the MoE layers see every rank's share);
- decode batch B: the largest within max_num_seqs and the KV cache at mean prompt + output whose
  such step is within the TPOT limit (the smallest limit on tpot; none: the largest batch);
- requests/s = ranks x B / (output x step_s(B));
- replicas = ceil(target rate / that), cost = replicas x GPUs x $ per GPU-hour.
A candidate whose batch-1 step already exceeds the TPOT limit, or whose prefill of the mean prompt
alone exceeds the TTFT limit, is estimated infeasible (infinite cost; still sized if kept). The
decode tokens/s (for a decode-only group, sim.planner.disagg_layouts) uses pure decode steps.

Selection: per hardware, the `keep` candidates of lowest estimated cost (ties: lower estimated
GPU-hours, then candidate order), and always, whatever their estimate, (a) every plain-TP candidate
within one node, the very candidates `plan` sizes without a layout search, so a layout search is
never dearer than the plain-TP search it widens (the bound-then-verify walk is exact over what is
sized: its minimum can only fall when candidates are added), and (b) the plain-TP candidate of
lowest estimated cost (which may span nodes). Per hardware, so adding a hardware kind never changes
which candidates of another kind are sized; with at most `keep` candidates per hardware nothing is
dropped and the plan's bound-then-verify guarantees hold over every candidate. The section says how
many were dropped and the cheapest dropped estimate (`best_dropped`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sim.errors import InputError
from sim.inputs.model import load_model
from sim.inputs.workload.trace import Trace
from sim.planner.candidates import Candidate, Skipped
from sim.planner.layouts import layout_label
from sim.planner.slo import PlanSLO

KIND = "analytic estimate from the roofline step cost (not a bound)"
ALWAYS_SIZED = ("every plain-TP candidate within one node (what plan sizes without a layout search), and the "
                "plain-TP candidate of lowest estimate")


@dataclass(frozen=True)
class Estimate:
    """One candidate's screen: the decode batch it would run, its requests/s per replica, the
    replicas and $/hour for the target rate (inf: estimated infeasible, `why` says why), and its
    prefill tokens/s and decode tokens/s per replica (for choosing disaggregated group layouts)."""

    decode_batch: int
    replica_qps: float
    replicas: float
    cost_per_hour_usd: float
    prefill_tok_s: float
    decode_tok_s: float
    why: str | None = None
    prefill_within_ttft: bool = True

    def to_dict(self) -> dict:
        return {"decode_batch": self.decode_batch, "replica_qps": self.replica_qps, "replicas": self.replicas,
                "cost_per_hour_usd": self.cost_per_hour_usd, "prefill_tok_s": self.prefill_tok_s,
                "decode_tok_s": self.decode_tok_s, "infeasible": self.why}


def replica_parts(cfg):
    """(memory plan, cost model) of one replica of `cfg`: the very ones `simulate` builds."""
    from sim.run.simulate import _replica_parts

    return _replica_parts(cfg, load_model(cfg.model), cfg.hardware, None)


def estimate(candidate: Candidate, trace: Trace, slo: PlanSLO, target_qps: float) -> Estimate:
    """The screen of one candidate (module docstring). Raises InputError when the simulator cannot
    price this replica (e.g. no all-to-all fit for its EP size on this profile)."""
    cfg = candidate.cfg
    memory, cost = replica_parts(cfg)
    prompt, output = float(trace.prompt_tokens.mean()), max(1.0, float(trace.output_tokens.mean()))
    limits = slo.per_request_limits_s()
    context = int(prompt + output / 2)

    def step_s(batch: int, with_prefill: bool) -> float:
        """A step of `batch` decodes, plus (steady state) the prompts' tokens that arrive per step."""
        new, cached = np.ones(batch, dtype=np.int64), np.full(batch, context, dtype=np.int64)
        chunk = int(min(batch * prompt / output, max(0, cfg.max_num_batched_tokens - batch))) if with_prefill else 0
        if chunk:
            new, cached = np.append(new, chunk), np.append(cached, int(prompt / 2))
        return cost.step_time_s(new, cached, batch)

    largest = int(max(1, min(cfg.max_num_seqs, memory.max_cached_tokens // max(1.0, prompt + output))))
    tpot_s = limits.get("tpot_s", math.inf)
    prefill_s = cost.step_time_s(np.array([max(1, int(prompt))]), np.zeros(1, dtype=np.int64), 1)
    ranks = cfg.layout().n_kv_ranks
    prefill_tok_s = ranks * prompt / prefill_s
    pure = _largest_within(lambda b: step_s(b, False), largest, tpot_s)
    decode_tok_s = 0.0 if pure is None else ranks * pure / step_s(pure, False)
    batch = _largest_within(lambda b: step_s(b, True), largest, tpot_s)
    prefill_ok = prefill_s <= limits.get("ttft_s", math.inf)
    if batch is None or not prefill_ok:
        why = (f"prefill of the mean prompt takes {prefill_s * 1e3:.0f} ms > the TTFT limit" if not prefill_ok
               else f"a batch-1 step with its prompts' share takes {step_s(1, True) * 1e3:.1f} ms > the TPOT limit")
        return Estimate(0, 0.0, math.inf, math.inf, prefill_tok_s, decode_tok_s, why, prefill_ok)
    replica_qps = ranks * batch / (output * step_s(batch, True))
    replicas = math.ceil(target_qps / replica_qps - 1e-9)
    return Estimate(batch, replica_qps, replicas, replicas * candidate.n_gpus * candidate.cost_per_gpu_hour_usd,
                    prefill_tok_s, decode_tok_s)


def _gpus_needed(c: Candidate, e: Estimate, target_qps: float) -> float:
    """GPUs the target rate would need if replicas came in fractions (breaks ties of whole replicas)."""
    return target_qps / e.replica_qps * c.n_gpus if e.replica_qps > 0 else math.inf


def _largest_within(step_s, largest: int, limit_s: float) -> int | None:
    """The largest batch in 1..largest whose step_s(batch) <= limit_s (step_s increasing in batch);
    None when not even 1 is."""
    if step_s(1) > limit_s:
        return None
    lo, hi = 1, largest
    if step_s(hi) <= limit_s:
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if step_s(mid) <= limit_s else (lo, mid)
    return lo


def screen(candidates: list[Candidate], trace: Trace, slo: PlanSLO, target_qps: float,
           keep: int | None) -> tuple[list[Candidate], list[Skipped], dict, list[tuple[Candidate, Estimate]]]:
    """(candidates to size, in their original order; those the simulator cannot price, skipped with
    why; plan.json's `screen` section; every priced candidate with its estimate, kept or not).
    `keep` None: nothing dropped (estimates still made and reported)."""
    estimates: list[tuple[Candidate, Estimate]] = []
    skipped: list[Skipped] = []
    for c in candidates:
        try:
            estimates.append((c, estimate(c, trace, slo, target_qps)))
        except InputError as exc:
            skipped.append(Skipped(c.cfg.hardware, c.cfg.tp, c.cfg.policy, exc.line(), layout_label(c.cfg)))
    chosen: set[int] = set()
    for hardware in dict.fromkeys(c.cfg.hardware for c, _ in estimates):
        mine = [i for i, (c, _) in enumerate(estimates) if c.cfg.hardware == hardware]
        mine.sort(key=lambda i: (estimates[i][1].cost_per_hour_usd, _gpus_needed(*estimates[i], target_qps), i))
        chosen.update(mine if keep is None else mine[:keep])
        plain = [i for i in mine if is_plain_tp(estimates[i][0])]
        chosen.update(plain[:1])
        chosen.update(i for i in plain if estimates[i][0].n_gpus <= estimates[i][0].gpus_per_node)
    rows = [{"candidate": c.label, "hardware": c.cfg.hardware, "sized": i in chosen, **e.to_dict()}
            for i, (c, e) in enumerate(estimates)]
    dropped = [row for row in rows if not row["sized"]]
    best_dropped = min(dropped, key=lambda r: r["cost_per_hour_usd"], default=None)
    section = {"kind": KIND, "keep_per_hardware": keep, "always_sized": ALWAYS_SIZED,
               "n_screened": len(estimates), "n_sized": len(chosen), "n_dropped": len(dropped),
               "best_dropped": None if best_dropped is None else
               {k: best_dropped[k] for k in ("candidate", "cost_per_hour_usd", "replicas", "infeasible")},
               "exact_over": "sized candidates only" if dropped else "every candidate", "estimates": rows}
    return [c for i, (c, _) in enumerate(estimates) if i in chosen], skipped, section, estimates


def is_plain_tp(candidate: Candidate) -> bool:
    """Whether the candidate is plain tensor parallelism (no PP, EP or attention DP)."""
    layout = candidate.cfg.layout()
    return layout.pp == 1 and layout.n_kv_ranks == 1 and not layout.uses_expert_parallel
