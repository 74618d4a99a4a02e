"""Static (request-level) batching: the naive baseline that PagedAttention and continuous
batching improve on.

Up to `max_num_seqs` waiting requests (after an optional batching window) form a batch. Each
reserves contiguous KV for the whole `max_model_len` (so the cache, not the seat count, often
limits the batch; the waste shows in kv_fragmentation). The batch is prefilled together, then
decodes until its longest member finishes: finished members keep their seat and are still
computed (padding) and nobody joins mid-batch. A member's finish time is its last token.
"""

from __future__ import annotations

import numpy as np

from sim.engine.request import Status
from sim.engine.sched.base import Scheduler
from sim.engine.sched.plan import StepPlan
from sim.errors import InputError


class StaticScheduler(Scheduler):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.reserve_blocks = -(-self.max_model_len // self.blocks.block_size)
        if self.reserve_blocks > self.blocks.n_blocks:
            raise InputError("max_model_len", None,
                             f"static batching reserves {self.reserve_blocks} blocks per request; the KV cache "
                             f"holds {self.blocks.n_blocks}: lower max_model_len")
        self.batch: list[int] = []

    def never_fits(self, rid: int) -> str | None:
        reason = super().never_fits(rid)
        need = len(self.table.rows_of(rid)) * self.reserve_blocks
        if reason is None and need > self.blocks.n_blocks:
            reason = (f"static batching reserves max_model_len for each of its samples: {need} blocks; "
                      f"the cache holds {self.blocks.n_blocks}")
        return reason

    def schedule(self, now_s: float, horizon_s: float) -> StepPlan | None:
        t = self.table
        if self.batch:
            remaining = t.output_tokens[self.batch] - (t.n_tokens[self.batch] - t.prompt_tokens[self.batch])
            if remaining.max() > 0:
                return self._decode_batch(remaining)
            self._end_batch()
        if not self.waiting:
            return None
        seats = min(self.cfg.max_num_seqs, self.blocks.n_blocks // self.reserve_blocks)
        window_end_s = t.arrival_s[self.waiting[0]] + self.cfg.batching_window_s
        if len(self.waiting) < seats and now_s < window_end_s:
            wait_s = min(window_end_s, horizon_s) - now_s
            return StepPlan(np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), np.array([wait_s]))
        seats_taken = 0  # a request takes a seat per sample (its samples join after the prefill)
        while self.waiting and seats_taken + len(t.rows_of(self.waiting[0])) <= seats:
            rid = self.waiting.popleft()
            seats_taken += len(t.rows_of(rid))
            self.blocks.grow(rid, self.reserve_blocks * self.blocks.block_size)
            self._mark_running(rid, now_s)
            self.batch.append(rid)
        if not self.batch:  # a request with more samples than seats still runs, alone
            return self._admit_alone(now_s)
        prompts = [int(t.n_tokens[r] - t.n_computed[r]) for r in self.batch]
        return self.single_step(list(self.batch), prompts)

    def _admit_alone(self, now_s: float) -> StepPlan:
        rid = self.waiting.popleft()
        self.blocks.grow(rid, self.reserve_blocks * self.blocks.block_size)
        self._mark_running(rid, now_s)
        self.batch.append(rid)
        return self.single_step([rid], [int(self.table.n_tokens[rid] - self.table.n_computed[rid])])

    def fork_samples(self, rid: int, now_s: float) -> list[int]:
        """Static batching keeps no shared pages: each sample gets its own max_model_len reservation."""
        t = self.table
        rows = [c for c in t.children.get(rid, ()) if t.status[c] == Status.PENDING]
        for child in rows:
            self.blocks.grow(child, self.reserve_blocks * self.blocks.block_size)
            t.n_computed[child] = t.n_computed[rid]
            t.n_tokens[child] = t.n_tokens[rid]
            t.first_token_s[child] = t.last_token_s[child] = t.first_token_s[rid]
            t.arrival_s[child] = t.arrival_s[rid]
            self._mark_running(child, now_s)
            self.batch.append(child)
        return rows

    def _decode_batch(self, remaining: np.ndarray) -> StepPlan:
        """Decode steps of the whole batch up to its next completion (finished members are still
        computed as padding), so each member's end is committed, and heard, when it happens."""
        rid = np.asarray(self.batch, dtype=np.int64)
        active = remaining > 0
        k = int(remaining[active].min())
        times = self.cost.decode_run_times_s(self.table.n_computed[rid], k)
        return StepPlan(rid[active], np.ones(int(active.sum()), dtype=np.int64), times, is_decode_run=True,
                        padded_ids=rid[~active])

    def _commit_decode_run(self, plan: StepPlan, end_s: float) -> int:
        """Padding members' KV grows with the batch; the active ones advance as in any decode run."""
        self.table.n_computed[plan.padded_ids] += plan.n_steps
        return super()._commit_decode_run(plan, end_s)

    def run_block_tokens(self, plan: StepPlan) -> np.ndarray:
        """Reserved up front: a static batch's blocks never grow during a run (a constant)."""
        return np.zeros(plan.n_steps)

    def _finish_done(self, candidates: np.ndarray, end_s: float) -> int:
        """Members keep their seat and reservation until the batch ends; only mark them done."""
        t = self.table
        candidates = np.asarray(candidates, dtype=np.int64)
        done = candidates[(t.n_tokens[candidates] - t.prompt_tokens[candidates]) >= t.output_tokens[candidates]]
        done = done[t.status[done] != Status.FINISHED]
        for r in done.tolist():
            if np.isnan(t.finish_s[r]):
                t.finish_s[r] = end_s
            t.status[r] = Status.FINISHED
            if self.finished_listener is not None and t.is_request_done(r):
                self.finished_listener(int(t.sample_of[r]))
        return int(done.size)

    def _end_batch(self) -> None:
        for r in self.batch:
            self.blocks.free_request(r)
        self.running = []
        self._unsettled.clear()
        self.batch = []
