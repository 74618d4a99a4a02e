"""Speculative decoding: a draft proposes k tokens per decoding sequence, the target verifies the
k+1 positions in one step, and the sequence keeps the accepted prefix plus one token of its own.

Acceptance: proposal j (1-based) is accepted with probability a_j given that proposals 1..j-1
were; the first rejection ends the run. Tokens gained per step = 1 + accepted proposals, with
expectation 1 + sum_j prod_{i<=j} a_i (one rate a for all: (1 - a^(k+1)) / (1 - a)). Draws come
from a generator seeded with (run seed, replica), one uniform per proposal, in plan order.

Step cost = draft time + the target's step with k+1 query tokens per decoding sequence and logits
at all k+1 positions, in ONE batched forward pass (vLLM's and SGLang's target verify). The verify
tokens are a decode step of k+1 queries per sequence (`verify_tokens`): on MLA they take the
absorbed decode kernel and re-expand no cached latents (`CostModel.decode_query_max`), and with an
engine preset the step is a uniform decode step (CUDA graph, decode CPU cost).
Draft time: `heads` (EAGLE-style) = k x spec_draft_cost x a decode-only target step over the
same sequences; `draft` = k decode steps of the draft model (same hardware and TP) over them;
`mtp` = k decode steps of the model's own MTP module (sim/cost/mtp.py), whose weights and KV
the memory plan adds.

KV: a sequence's table grows by the tokens it keeps. Blocks for the accepted tokens are taken
when the step is planned; when they are short the sequence keeps only its own token (as if every
proposal were rejected). The k - accepted rejected slots a real engine reserves for the length
of one step are not modelled. Inter-token gaps are one per step and sequence (tokens that arrive
together share one gap), as serving benchmarks measure chunks of streamed output. A draft
model's own weights and KV cache are not taken out of the target's memory plan.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from sim.engine.sched.plan import StepPlan

if TYPE_CHECKING:
    from sim.cost import CostModel
    from sim.engine.sched.base import Scheduler
    from sim.inputs.config import EngineConfig

SPEC_STREAM = 0x5BEC  # keeps spec-decoding draws apart from every other random stream of a run


def expected_tokens_per_step(acceptance: list[float]) -> float:
    """1 + sum over j of the probability that the first j proposals are all accepted."""
    return 1.0 + float(np.cumprod(np.asarray(acceptance, dtype=np.float64)).sum())


def draw_accepted(rng: np.random.Generator, acceptance: np.ndarray, n_seqs: int) -> np.ndarray:
    """Accepted proposals (0..k) for each of n_seqs sequences: the length of the leading run of
    uniforms below their position's acceptance rate."""
    if n_seqs == 0 or acceptance.shape[0] == 0:
        return np.zeros(n_seqs, dtype=np.int64)
    ok = rng.random((n_seqs, acceptance.shape[0])) < acceptance
    return np.cumprod(ok, axis=1).sum(axis=1).astype(np.int64)


class SpecDecoder:
    """Plans the steps of one replica whose decoding sequences speculate."""

    def __init__(self, cfg: EngineConfig, cost: CostModel, draft_cost: CostModel | None, replica: int):
        self.k = cfg.spec_tokens
        self.acceptance = np.asarray(cfg.acceptance_per_position(), dtype=np.float64)
        self.method, self.relative_cost = cfg.spec_method, cfg.spec_draft_cost
        self.cost, self.draft_cost = cost, draft_cost
        self.mtp = None
        if self.method == "mtp":
            from sim.cost.mtp import MTPDraft

            self.mtp = MTPDraft(getattr(cost, "gpu", cost), self.k)  # an engine's cost wraps the GPU's
        self.rng = np.random.default_rng([cfg.seed, SPEC_STREAM, replica])
        self.n_steps = 0
        self.n_proposed = 0
        self.n_accepted = 0

    def draft_time_s(self, contexts: np.ndarray) -> float:
        n = int(contexts.shape[0])
        if n == 0:
            return 0.0
        if self.method == "draft":
            return float(self.draft_cost.decode_run_times_s(contexts, self.k).sum())
        if self.mtp is not None:
            return self.mtp.time_s(contexts)
        one_step_s = self.cost.step_time_s(np.ones(n, dtype=np.int64), contexts, n)
        return self.k * self.relative_cost * one_step_s

    def decode_step_time_s(self, contexts: np.ndarray) -> float:
        """A step that only verifies these decoding sequences (drafting included)."""
        n = int(contexts.shape[0])
        verify = np.full(n, self.k + 1, dtype=np.int64)
        return self.cost.step_time_s(verify, contexts, n * (self.k + 1), verify_tokens=self.k + 1) + \
            self.draft_time_s(contexts)

    def plan_step(self, sched: Scheduler, ids: list[int], new_tokens: list[int], transfer_s: float) -> StepPlan:
        """One step of `ids` (decoding ones speculate); grows the decoding tables to the kept tokens.
        The plan's `spec_extra` holds the accepted proposals per sequence (0 for prefills)."""
        t = sched.table
        rid = np.asarray(ids, dtype=np.int64)
        q = np.asarray(new_tokens, dtype=np.int64)
        c = t.n_computed[rid]
        decoding = (q == 1) & (c >= t.prompt_tokens[rid])
        n_dec = int(np.count_nonzero(decoding))
        extra = np.zeros(rid.shape[0], dtype=np.int64)
        if n_dec:
            extra[decoding] = self._accepted_within_limits(sched, rid[decoding], c[decoding])
        q_cost = np.where(decoding, self.k + 1, q)
        n_sampled = int(np.count_nonzero(~decoding & (c + q == t.n_tokens[rid]))) + n_dec * (self.k + 1)
        step_s = self.cost.step_time_s(q_cost, c, n_sampled, verify_tokens=self.k + 1) + self.draft_time_s(c[decoding])
        self.n_steps += 1
        return StepPlan(rid, q, np.array([step_s]), transfer_s=transfer_s, spec_extra=extra,
                        moe_tokens=int(q_cost.sum()))

    def _accepted_within_limits(self, sched: Scheduler, rows: np.ndarray, contexts: np.ndarray) -> np.ndarray:
        """Draw, then cap by the tokens still wanted and the blocks free; grow the tables."""
        t = sched.table
        accepted = draw_accepted(self.rng, self.acceptance, rows.shape[0])
        self.n_proposed += self.k * rows.shape[0]
        self.n_accepted += int(accepted.sum())
        remaining = t.output_tokens[rows] - (t.n_tokens[rows] - t.prompt_tokens[rows])
        accepted = np.minimum(accepted, np.maximum(remaining - 1, 0))
        size = sched.blocks.block_size
        held = np.array([len(sched.blocks.table(int(r))) for r in rows], dtype=np.int64)
        need = int(np.maximum(-(-(contexts + 1 + accepted) // size) - held, 0).sum())
        if not sched.make_room(need):
            accepted[:] = 0
        sched.blocks.grow_many(rows.tolist(), (contexts + 1 + accepted).tolist())
        return accepted

    def stats(self) -> dict:
        return {"spec_steps": self.n_steps, "spec_proposed": self.n_proposed, "spec_accepted": self.n_accepted}


def draft_model_of(cfg: EngineConfig):
    """The draft's ModelSpec under `spec_method: draft` with spec_tokens > 0, else None."""
    if not cfg.spec_tokens or cfg.spec_method != "draft":
        return None
    from sim.errors import InputError
    from sim.inputs.model import load_model

    try:
        return load_model(cfg.spec_draft_model)
    except InputError as error:  # name the flag the user set, not --model
        where = "--spec-draft-model" if error.where == "--model" else error.where
        raise InputError(where, error.field, error.allowed) from None


def make_spec_decoder(cfg: EngineConfig, cost: CostModel, replica: int) -> SpecDecoder | None:
    """The replica's SpecDecoder, or None when speculative decoding is off."""
    if not cfg.spec_tokens:
        return None
    draft = None
    draft_model = draft_model_of(cfg)
    if draft_model is not None:
        from sim.cost import CostModel as RooflineCost

        draft = RooflineCost(draft_model, cost.hw, cost.tp, cfg.weight_dtype, cfg.kv_dtype, cfg.block_size)
    return SpecDecoder(cfg, cost, draft, replica)
