"""Continuous (iteration-level) batching, vLLM-v0 style: prefills take priority.

Each step either prefills newly admitted requests whole (as many as fit `max_num_seqs`,
`max_num_batched_tokens` and free blocks) or decodes every running request one token.
Out of blocks, the newest running request is preempted (recompute or swap).
"""

from __future__ import annotations

import math

from sim.engine.sched.base import Scheduler
from sim.engine.sched.plan import StepPlan


class ContinuousScheduler(Scheduler):
    def schedule(self, now_s: float, horizon_s: float) -> StepPlan | None:
        transfer_s = self.swap_in_ready(now_s)
        admitted, tokens = self._admit_prefills(now_s)
        if admitted:
            return self.single_step(admitted, tokens, transfer_s)
        decodes, more_s = self.prepare_decodes(list(self.running), now_s, grow=False)
        if not decodes:
            return None
        # a queue that cannot move until something finishes lets the run pass arrivals (they queue behind
        # its head), unless arrivals are held back a step (async scheduling): their hand-over two steps on,
        # where one that never fits is rejected, must not slip (tests/test_reference_stepper.py)
        passes_arrivals = self.waiting and not self.uses_waiting_order and not self.holds_arrivals_back
        horizon = math.inf if passes_arrivals else horizon_s
        return self.decode_run(decodes, now_s, horizon, transfer_s + more_s, past_finishes=not self.waiting)

    def _admit_prefills(self, now_s: float) -> tuple[list[int], list[int]]:
        """Admit waiting requests FCFS while seats, token budget and blocks allow."""
        admitted: list[int] = []
        tokens: list[int] = []
        budget = self.cfg.max_num_batched_tokens
        while self.waiting and not self.swapped and len(self.running) < self.cfg.max_num_seqs:
            rid = self.waiting[0]
            wanted = int(self.table.n_tokens[rid] - self.table.n_computed[rid])
            if admitted and sum(tokens) + wanted > budget:
                break  # a lone prompt larger than the budget still runs, alone
            n_new = self.try_admit(rid, math.inf, now_s)
            if n_new is None:
                break
            self.waiting.popleft()
            admitted.append(rid)
            tokens.append(n_new)
        return admitted, tokens
