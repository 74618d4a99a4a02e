"""Chunked prefill (Sarathi-style, vLLM V1 semantics): one token budget per step,
`max_num_batched_tokens`, shared by running decodes first, then the remaining prompt of partially
prefilled requests, then new requests' prompt chunks. `chunk_size`, when set, caps the chunk any
one request takes in a step (SGLang's chunked_prefill_size, vLLM's long_prefill_token_threshold).

When every running request is a partial prefill that cannot get a block for its next chunk, the
newest is preempted, and no one is admitted or swapped in until one of them can run (vLLM V1 too
preempts the lowest-priority running request and admits no one in that step); without this the
batch would hold the cache forever."""

from __future__ import annotations

import math

from sim.engine.sched.base import Scheduler
from sim.engine.sched.plan import StepPlan


class ChunkedScheduler(Scheduler):
    def schedule(self, now_s: float, horizon_s: float) -> StepPlan | None:
        plan = self._plan(now_s, horizon_s)
        preempted_s = 0.0
        while plan is None and self.running and not self.blocked_on_transfers():  # stuck partial prefills
            preempted_s += self.preempt(self.running[-1], now_s)
            plan = self._plan(now_s, horizon_s, preempted_s, admit=not self.running)
        return plan

    def _plan(self, now_s: float, horizon_s: float, preempted_s: float = 0.0, admit: bool = True) -> StepPlan | None:
        """The step (or decode run) to run now; `admit=False`: no swap-in and no new admission
        (`preempted_s`: swap traffic of preemptions made for this step)."""
        transfer_s = preempted_s + (self.swap_in_ready(now_s) if admit else 0.0)
        decoding, prefilling = self.split_decoding(self.running)
        if self.holds_context:  # TensorRT-LLM attention-DP balancing held this iteration's context requests
            return self._held_step(decoding, now_s, transfer_s)
        if not prefilling and not self.waiting:  # nothing to chunk: a decode run takes its own blocks
            decodes, more_s = self.prepare_decodes(decoding, now_s, grow=False)
            if not decodes:
                return None
            # a request preempted just now to recompute waits again: its first chunk may fit next step
            horizon = now_s if self.waiting else horizon_s
            return self.decode_run(decodes, now_s, horizon, transfer_s + more_s, past_finishes=True)
        n_running = len(self.running)
        decodes, more_s = self.prepare_decodes(decoding, now_s, grow=True)
        if len(self.running) != n_running:  # preemptions: the victims are no longer running
            still = set(self.running)
            prefilling = [r for r in prefilling if r in still]
        transfer_s += more_s
        budget = self.cfg.max_num_batched_tokens - len(decodes) * self.decode_tokens_per_seq()
        ids, tokens = self._prefill_chunks(prefilling, budget, now_s, admit)
        if not ids and decodes:
            # a stuck queue lets the run pass arrivals (they queue behind its head), unless arrivals are held
            # back a step (async scheduling: see ContinuousScheduler.schedule; tests/test_reference_stepper.py)
            passes_arrivals = self.waiting and not self.uses_waiting_order and not self.holds_arrivals_back
            horizon = math.inf if passes_arrivals else horizon_s
            return self.decode_run(decodes, now_s, horizon, transfer_s, first_step_grown=True)
        if not ids and not decodes:
            return None
        return self.single_step(decodes + ids, [1] * len(decodes) + tokens, transfer_s, n_decoding=len(decodes))

    def _held_step(self, decoding: list[int], now_s: float, transfer_s: float) -> StepPlan | None:
        """One step of the running decodes only (a decode run cut to this step: the balancer decides again
        at the next iteration); None when no rank-local decode is running."""
        decodes, more_s = self.prepare_decodes(decoding, now_s, grow=False)
        if not decodes:
            return None
        return self.decode_run(decodes, now_s, now_s, transfer_s + more_s, past_finishes=False)

    def _prefill_chunks(self, prefilling: list[int], budget: int, now_s: float,
                        admit: bool = True) -> tuple[list[int], list[int]]:
        """Fill the budget: partial prefills (`prefilling`, running in admission order), then (`admit`)
        new admissions FCFS."""
        t, b = self.table, self.blocks
        cap = self.cfg.chunk_size or math.inf
        ids: list[int] = []
        tokens: list[int] = []
        for rid in prefilling:
            if budget <= 0:
                break
            n_new = int(min(t.n_tokens[rid] - t.n_computed[rid], budget, cap))
            if not self.make_room(b.blocks_needed(rid, int(t.n_computed[rid]) + n_new)):
                continue
            b.grow(rid, int(t.n_computed[rid]) + n_new)
            ids.append(rid)
            tokens.append(n_new)
            budget -= n_new
        while admit and budget > 0 and self.waiting and not self.swapped and len(self.running) < self.cfg.max_num_seqs:
            rid = self.waiting[0]
            n_new = self.try_admit(rid, min(budget, cap), now_s)
            if n_new is None:
                break
            self.waiting.popleft()
            ids.append(rid)
            tokens.append(n_new)
            budget -= n_new
        return ids, tokens
