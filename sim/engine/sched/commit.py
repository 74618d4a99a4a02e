"""Committing a finished plan: advance tokens, stamp first-token and finish times, record gaps,
steps and KV use, free what finished requests held. Mixed into `sim.engine.sched.base.Scheduler`."""

from __future__ import annotations

import contextlib
import math

import numpy as np

from sim.engine.request import Status
from sim.engine.sched.plan import StepPlan

SCALAR_COMMIT_MAX_SEQS = 64  # steps of at most this many sequences commit in one Python pass
FEW_FINISHED = 4  # at most this many finished requests leave the running list one by one


class Commits:
    """Applying plans (needs the Scheduler's table, blocks, recorder, running list and hooks)."""

    def commit(self, plan: StepPlan, end_s: float) -> int:
        """Apply a finished plan at `end_s`: advance tokens, stamp first-token/finish times,
        record inter-token gaps, free the blocks of finished requests. Returns how many finished."""
        if self.recorder.attribution is not None:  # hook: latency attribution (sim/run/attribution.py)
            self.recorder.attribution.on_plan(plan, end_s, self)
        if self.energy is not None:  # hook: energy per step and per request (sim/engine/energy.py)
            self.energy.on_plan(plan, self)
        if plan.is_decode_run:
            return self._commit_decode_run(plan, end_s)
        if plan.req_ids.size == 0:
            return 0  # an idle wait (static batching window)
        return self._commit_step(plan, end_s)

    def _commit_step(self, plan: StepPlan, end_s: float) -> int:
        if plan.req_ids.shape[0] <= SCALAR_COMMIT_MAX_SEQS and plan.spec_extra is None:
            return self._commit_step_scalar(plan, end_s)
        t = self.table
        rid, q = plan.req_ids, plan.new_tokens
        t.n_computed[rid] += q
        is_sampled = t.n_computed[rid] == t.n_tokens[rid]
        sampled = rid[is_sampled]
        t.n_tokens[sampled] += 1
        first = np.isnan(t.first_token_s[sampled])
        t.first_token_s[sampled[first]] = end_s
        later = sampled[~first]
        if later.size:
            self.recorder.add_unit_gaps(end_s - t.last_token_s[later], later)
        t.last_token_s[sampled] = end_s
        if plan.spec_extra is not None:  # hook: speculative decoding keeps its accepted proposals
            t.n_computed[rid] += plan.spec_extra
            t.n_tokens[rid] += plan.spec_extra
        prefill_done = sampled[first | (q[is_sampled] > 1)]
        forked: list[int] = []
        for r in prefill_done.tolist():
            self.on_prefill_done(r, end_s)
            forked += self.fork_samples(r, end_s)
        if forked:
            sampled = np.concatenate([sampled, np.asarray(forked, dtype=np.int64)])
        self.recorder.step(self, end_s, plan, int(q[q > 1].sum()), int(np.count_nonzero(q == 1)))
        return self._finish_done(sampled, end_s)

    def _commit_step_scalar(self, plan: StepPlan, end_s: float) -> int:
        """`_commit_step` for a few sequences, one Python pass (same effects, same order)."""
        t = self.table
        n_computed, n_tokens, first_token_s, last_token_s = t.n_computed, t.n_tokens, t.first_token_s, t.last_token_s
        sampled: list[int] = []
        prefill_done: list[int] = []
        gaps: list[float] = []
        gap_rows: list[int] = []
        prefill_tokens = decode_tokens = 0
        head = plan.n_decoding
        if head > 1:  # decoding rows: each samples its next token (the loop's effects, in a few array operations)
            rows = plan.req_ids[:head]
            n_computed[rows] += 1
            n_tokens[rows] += 1
            self.recorder.add_unit_gaps(end_s - last_token_s[rows], rows)
            last_token_s[rows] = end_s
            sampled = rows.tolist()
            decode_tokens = head
        else:
            head = 0
        for r, n_new in zip(plan.req_ids[head:].tolist(), plan.new_tokens[head:].tolist()):
            if n_new > 1:
                prefill_tokens += n_new
            elif n_new == 1:
                decode_tokens += 1
            computed = n_computed[r] + n_new
            n_computed[r] = computed
            if computed != n_tokens[r]:
                continue
            n_tokens[r] = computed + 1
            sampled.append(r)
            if math.isnan(first_token_s[r]):
                first_token_s[r] = end_s
                prefill_done.append(r)
            else:
                gaps.append(end_s - last_token_s[r])
                gap_rows.append(r)
                if n_new > 1:
                    prefill_done.append(r)
            last_token_s[r] = end_s
        if gaps:
            self.recorder.add_unit_gaps(gaps, gap_rows)
        for r in prefill_done:
            self.on_prefill_done(r, end_s)
            sampled += self.fork_samples(r, end_s)
        self.recorder.step(self, end_s, plan, prefill_tokens, decode_tokens)
        return self._finish_done(sampled, end_s)

    def _commit_decode_run(self, plan: StepPlan, end_s: float) -> int:
        if plan.seq_steps is not None:
            return self._commit_run_past_finishes(plan, end_s)
        t = self.table
        rid, k = plan.req_ids, plan.n_steps
        start_s = end_s - plan.duration_s + plan.transfer_s
        first_end_s = start_s + plan.step_times_s[0]
        self.recorder.add_run_gaps(first_end_s - t.last_token_s[rid], plan.step_times_s[1:], rid)
        t.n_computed[rid] += k
        t.n_tokens[rid] += k
        t.last_token_s[rid] = end_s
        self.recorder.run(self, start_s, plan)
        if plan.steps_to_first_finish is not None and k < plan.steps_to_first_finish:
            return 0  # nobody reached their last token
        return self._finish_done(rid, end_s)

    def _finish_done(self, candidates: np.ndarray | list[int], end_s: float) -> int:
        t = self.table
        if isinstance(candidates, list):
            done = [r for r in candidates if t.n_tokens[r] >= t.final_tokens[r]]
        else:
            done = candidates[t.n_tokens[candidates] >= t.final_tokens[candidates]].tolist()
        if not done:
            return 0
        self._release_finished(done, end_s)
        return len(done)

    def _release_finished(self, done: list[int], end_s: float) -> None:
        """`done` (running rows that generated their last token) finish at `end_s`."""
        t = self.table
        if self._reserved_blocks:
            self.unreserve(done)
        if len(done) <= FEW_FINISHED:  # a few: each found by one list scan in C
            for r in done:
                _discard(self.running, r)
        else:
            done_set = set(done)
            self.running = [r for r in self.running if r not in done_set]
        for r in done:
            t.status[r] = Status.FINISHED
            t.finish_s[r] = end_s
            self.on_release(r)
            self.blocks.free_request(r)
            self._cow_pending.discard(r)
            self._unsettled.discard(r)
            if self.finished_listener is not None and t.is_request_done(r):
                self.finished_listener(int(t.sample_of[r]))


def _discard(items: list[int], item: int) -> None:
    """Remove `item` from `items` if there (in place, keeping the others' order)."""
    with contextlib.suppress(ValueError):
        items.remove(item)
