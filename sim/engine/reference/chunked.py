"""Chunked prefill (Sarathi style, vLLM V1 semantics) on one replica, one step at a time. The loop,
arrivals, rejections, swap-ins, preemption and the step's commit are the continuous stepper's
(sim/engine/reference/continuous.py); what a step runs is formed differently:

1. swapped-out requests come back, oldest first, while their blocks fit;
2. running requests with one token left and their whole prompt cached decode; the others are
   partial prefills (a prompt's own last token, chunked, is still prefill);
3. with no partial prefill and nobody waiting, the step decodes every running request (the newest
   preempted while blocks are short for the tokens it adds);
4. otherwise the decoding requests get their next token's block first (the newest running request,
   decoding or not, preempted while blocks are short); one token budget per step,
   `max_num_batched_tokens`, goes to them first, then to the partial prefills in admission order (each
   takes up to what is left of its prompt, the budget and `chunk_size`, skipped when its chunk's
   blocks are not free), then to waiting requests admitted first come, first served (a chunk of at
   most the budget and `chunk_size`; seats, free blocks with the watermark kept, and reserve_full as
   in the continuous policy; nobody is admitted while requests are swapped out);
5. when that forms no step although requests run (every one a partial prefill short of blocks), the
   newest running request is preempted and the step is formed again, admitting no one until nobody
   runs (vLLM V1 does the same), so a batch cannot hold the cache forever.
"""

from __future__ import annotations

import math

from sim.engine.reference.continuous import ContinuousStepper


class ChunkedStepper(ContinuousStepper):
    """One replica replaying `table` (its rows in arrival order) under the chunked-prefill policy."""

    def step(self) -> bool:
        """Plan, run and commit one step; False when there was nothing to run."""
        formed = self.form_step(admit=True, transfer_s=0.0)
        preempted_s = 0.0
        while formed is None and self.running:  # stuck partial prefills
            preempted_s += self.preempt(self.running[-1])
            formed = self.form_step(admit=not self.running, transfer_s=preempted_s)
        if formed is None:
            return False
        self.run_step(*formed)
        return True

    def is_decoding(self, rid: int) -> bool:
        t = self.table
        computed = int(t.n_computed[rid])
        return int(t.n_tokens[rid]) - computed == 1 and computed >= int(t.prompt_tokens[rid])

    def form_step(self, admit: bool, transfer_s: float) -> tuple[list[int], list[int], float] | None:
        """(requests, tokens each computes, swap seconds) of the step to run now, or None. `admit` False:
        no swap-in and no admission; `transfer_s`: swap traffic of preemptions made for this step."""
        if admit:
            transfer_s += self.swap_in()
        decoding = [rid for rid in self.running if self.is_decoding(rid)]
        prefilling = [rid for rid in self.running if not self.is_decoding(rid)]
        if not prefilling and not self.waiting:
            transfer_s += self.make_room_for_decodes()
            ids = list(self.running)
            if not ids:
                return None
            for rid in ids:
                self.take_blocks(rid, int(self.table.n_computed[rid]) + 1)
            return ids, [1] * len(ids), transfer_s
        transfer_s += self.make_room_for_tokens_of(decoding)
        decoding = [rid for rid in decoding if rid in self.running]
        prefilling = [rid for rid in prefilling if rid in self.running]
        budget = self.cfg.max_num_batched_tokens - len(decoding)
        ids, tokens = self.prefill_chunks(prefilling, budget, admit)
        if not ids and not decoding:
            return None
        return decoding + ids, [1] * len(decoding) + tokens, transfer_s

    def make_room_for_tokens_of(self, decoding: list[int]) -> float:
        """Give each of `decoding` the block its next token needs, preempting the newest running request
        (decoding or not) while blocks are short; returns the swap transfer seconds."""
        t = self.table
        transfer_s = 0.0
        while True:
            survivors = [rid for rid in decoding if rid in self.running]
            opening = [rid for rid in survivors if t.n_computed[rid] % self.block_size == 0]
            if len(opening) <= self.n_free or not self.running:
                for rid in survivors:
                    self.take_blocks(rid, int(t.n_computed[rid]) + 1)
                return transfer_s
            transfer_s += self.preempt(self.running[-1])

    def prefill_chunks(self, prefilling: list[int], budget: int, admit: bool) -> tuple[list[int], list[int]]:
        """The budget's chunks: partial prefills in admission order, then (`admit`) new admissions FCFS."""
        t, cap = self.table, self.cfg.chunk_size or math.inf
        ids: list[int] = []
        tokens: list[int] = []
        for rid in prefilling:
            if budget <= 0:
                break
            computed = int(t.n_computed[rid])
            n_new = int(min(int(t.n_tokens[rid]) - computed, budget, cap))
            if self.blocks_for(computed + n_new) - self.held.get(rid, 0) > self.n_free:
                continue
            self.take_blocks(rid, computed + n_new)
            ids.append(rid)
            tokens.append(n_new)
            budget -= n_new
        while admit and budget > 0 and self.waiting and not self.swapped and len(self.running) < self.cfg.max_num_seqs:
            rid = self.waiting[0]
            if self.cfg.kv_admission == "reserve_full" and not self.reserve(rid):
                break
            computed = int(t.n_computed[rid])
            n_new = int(min(int(t.n_tokens[rid]) - computed, budget, cap))
            if n_new <= 0 or self.blocks_for(computed + n_new) > self.n_free - self.watermark_blocks:
                self.reserved.pop(rid, None)
                break
            self.take_blocks(rid, computed + n_new)
            self.waiting.popleft()
            self.start_running(rid)
            ids.append(rid)
            tokens.append(n_new)
            budget -= n_new
        return ids, tokens
