"""Chunked prefill (Sarathi-style): a token budget per step; running decodes first, then the
remaining prompt of partially prefilled requests, then new requests' prompt chunks."""

from __future__ import annotations

import math

from sim.sched.base import Scheduler
from sim.sched.plan import StepPlan


class ChunkedScheduler(Scheduler):
    def schedule(self, now_s: float, horizon_s: float) -> StepPlan | None:
        transfer_s = self.swap_in_ready(now_s)
        decoding = [r for r in self.running if self.is_decoding(r)]
        decodes, more_s = self.prepare_decodes(decoding, now_s, grow=True)
        transfer_s += more_s
        budget = self.cfg.chunk_size - len(decodes) * self.decode_tokens_per_seq()
        ids, tokens = self._prefill_chunks(budget, now_s)
        if not ids and decodes:
            horizon = horizon_s if (not self.waiting or self.uses_waiting_order) else math.inf
            return self.decode_run(decodes, now_s, horizon, transfer_s)
        if not ids and not decodes:
            return None
        return self.single_step(decodes + ids, [1] * len(decodes) + tokens, transfer_s)

    def _prefill_chunks(self, budget: int, now_s: float) -> tuple[list[int], list[int]]:
        """Fill the budget: partial prefills in admission order, then new admissions FCFS."""
        t, b = self.table, self.blocks
        ids: list[int] = []
        tokens: list[int] = []
        for rid in [r for r in self.running if not self.is_decoding(r)]:
            if budget <= 0:
                break
            n_new = int(min(t.n_tokens[rid] - t.n_computed[rid], budget))
            if not self.make_room(b.blocks_needed(rid, int(t.n_computed[rid]) + n_new)):
                continue
            b.grow(rid, int(t.n_computed[rid]) + n_new)
            ids.append(rid)
            tokens.append(n_new)
            budget -= n_new
        while budget > 0 and self.waiting and not self.swapped and len(self.running) < self.cfg.max_num_seqs:
            rid = self.waiting[0]
            n_new = self.try_admit(rid, budget, now_s)
            if n_new is None:
                break
            self.waiting.popleft()
            ids.append(rid)
            tokens.append(n_new)
            budget -= n_new
        return ids, tokens
