"""Latency attribution: where each request's end-to-end time went, step by step.

Every moment between a request's arrival and its end falls in exactly one part:

| part | what the request was doing |
|---|---|
| queue | waiting before its first step (and, disaggregated, before its first decode step) |
| prefill | its own share of the steps that computed its prompt |
| interference | others' work: its share of shared steps spent on other prefills; steps it sat out while running |
| decode | steps that computed its output tokens (as long as a decode-only step of those sequences) |
| preempted | waiting again, or swapped out, after a preemption |
| recompute | its own share of steps that recomputed tokens it had computed before a preemption |
| swap | host-link transfers at the start of its steps (swap in/out, host-tier prefix loads) |
| kv_transfer | disaggregated: from the end of its prefill to its KV landing on a decode replica |
| samples | parallel sampling: from this row's end to its request's last sample's end |
| frontend | the API server's constant request path (sim.engine.frontend) |
| tokenize | waiting for and tokenising its prompt in the engine's tokenizer process (sim.engine.frontend) |

How a single step of duration T (transfer excluded) is split among its sequences: a decode-only
step is decode for all. Otherwise T_dec = the time of a decode-only step of the step's decode
sequences (0 if none); a decode sequence gets T_dec as decode and T - T_dec as interference; a
prefill sequence bringing q of the step's P prefill tokens owns (T - T_dec) * q / P (prefill, or
recompute for tokens below its high-water mark) and the rest of T is interference. A decode run
is decode for all its sequences.

The parts telescope: each step adds (start - previous mark) as waiting and (end - start) as
work (for a request that ran in the step just before, start is that step's end exactly), so
they sum to finish - arrival up to float rounding (tests hold 1e-9 s). Only a request's own row
(not its extra samples' rows) is followed.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from sim.run.attribution_split import FEW_ROWS, StepSplit

if TYPE_CHECKING:
    from sim.engine.request import RequestTable
    from sim.engine.sched.base import Scheduler
    from sim.engine.sched.plan import StepPlan

PARTS = ("queue", "prefill", "interference", "decode", "preempted", "recompute", "swap", "kv_transfer",
         "samples", "frontend", "tokenize")
_INDEX = {name: i for i, name in enumerate(PARTS)}
SCALAR_MAX_ROWS = 32  # plans of at most this many own rows are accounted in one Python pass
SAME_INSTANT_S = 1e-9  # a mark this close to a step's start is that start (float rounding of end - duration)


class Attribution(StepSplit):
    """Per-request time parts, accumulated at every committed plan (shared by all replicas)."""

    def __init__(self, table: RequestTable):
        n = table.n_requests
        self.table = table
        self.parts_s = np.zeros((len(PARTS), n))
        self.mark_s = np.full(n, np.nan)  # end of the last step the request was in (NaN: none yet)
        self.fresh = np.ones(n, dtype=bool)  # the next wait is queueing (not started yet, or just landed)
        self.high_water = np.zeros(n, dtype=np.int64)  # prompt tokens computed so far (recompute below it)
        self._part = {name: self.parts_s[i] for i, name in enumerate(PARTS)}  # row views: 1-D fancy indexing
        self._all_own_rows = table.sample_of.shape[0] == n  # no extra sample rows to leave out

    def landed(self, rid: int, now_s: float) -> None:
        """Disaggregation: the request's KV landed on a decode replica at `now_s`. The time since its
        prefill step is kv_transfer; its wait there until its first decode step is queueing."""
        if rid < self.fresh.shape[0]:
            self.parts_s[_INDEX["kv_transfer"], rid] += now_s - self.mark_s[rid]
            self.mark_s[rid] = now_s
            self.fresh[rid] = True

    def on_plan(self, plan: StepPlan, end_s: float, sched: Scheduler) -> None:
        """Account a plan about to be committed at `end_s` (call BEFORE the commit mutates tokens)."""
        rows = plan.req_ids
        n = self.fresh.shape[0]
        if rows.size == 0:
            return
        q = plan.new_tokens
        own = None
        if not self._all_own_rows:
            own = rows < n
            if not own.all():
                rows, q = rows[own], q[own]
                if rows.size == 0:
                    return
        start_s = end_s - plan.duration_s
        if plan.seq_steps is not None:  # a run past finishes (no transfer): each row's work ends with its steps
            row_end_s = plan.step_end_s[plan.seq_steps - 1]
            if own is not None:
                row_end_s = row_end_s[own]
            self._part["decode"][rows] += row_end_s - self._account_wait(rows, start_s)
            self.mark_s[rows] = row_end_s
            return
        if rows.shape[0] <= SCALAR_MAX_ROWS:
            if plan.n_decoding > 1 and own is None and self._on_mixed_step(rows, q, plan, start_s, end_s, sched):
                return
            self._on_plan_scalar(rows, q, plan, start_s, end_s, sched)
            return
        # work span per row = end - (its last mark, or the step start after a real wait): the
        # parts telescope exactly, and consecutive steps need no wait bookkeeping
        span_s = end_s - self._account_wait(rows, start_s)
        if plan.transfer_s:
            self._part["swap"][rows] += plan.transfer_s
            span_s = span_s - plan.transfer_s
        if plan.is_decode_run:
            self._part["decode"][rows] += span_s
        else:
            self._split_step(rows, q, span_s, plan, sched)
        self.mark_s[rows] = end_s

    def _on_plan_scalar(self, row_ids: np.ndarray, q: np.ndarray, plan: StepPlan, start_s: float, end_s: float,
                        sched: Scheduler) -> None:
        """`on_plan` for a few rows in one Python pass: the same float operations per row as the
        array path (`_account_wait`, `_split_step`), so the same values."""
        mark_s, part = self.mark_s, self._part
        rows = row_ids.tolist()
        marks = list(map(mark_s.item, rows)) if len(rows) <= FEW_ROWS else mark_s[row_ids].tolist()
        first = marks[0]
        if abs(first - start_s) <= SAME_INSTANT_S and marks.count(first) == len(marks):  # all ran in the step before
            if plan.is_decode_run and not plan.transfer_s:  # the common case: one span for all
                part["decode"][row_ids] += end_s - first
                mark_s[row_ids] = end_s
                return
            spans_s = [end_s - first] * len(marks)
        else:
            spans_s = self._book_waits(rows, marks, start_s, end_s)
        if plan.transfer_s:
            part["swap"][row_ids] += plan.transfer_s
            spans_s = [span - plan.transfer_s for span in spans_s]
        if plan.is_decode_run:
            part["decode"][row_ids] += spans_s
        else:
            self._split_step_scalar(rows, q.tolist(), spans_s, plan, sched)
        if len(rows) <= FEW_ROWS:
            for r in rows:
                mark_s[r] = end_s
        else:
            mark_s[row_ids] = end_s

    def _on_mixed_step(self, rows: np.ndarray, q: np.ndarray, plan: StepPlan, start_s: float, end_s: float,
                       sched: Scheduler) -> bool:
        """`_on_plan_scalar` for a step whose first `plan.n_decoding` rows decode and ran in the step
        just before and whose other rows prefill (chunked prefill's usual step): the decoding rows in
        a few array operations, the same float operations per row. False (nothing booked) otherwise."""
        head = plan.n_decoding
        dec_rows, pre_rows = rows[:head], rows[head:].tolist()
        dec_marks = self.mark_s[dec_rows]
        dec_mark_s = float(dec_marks[0])  # the decoding rows all ended the step before: one mark (checked)
        if (plan.transfer_s or not pre_rows or not abs(dec_mark_s - start_s) <= SAME_INSTANT_S
                or not np.equal(dec_marks, dec_mark_s).all()):
            return False
        t, part = self.table, self._part
        pre_q = q[head:].tolist()
        n_computed, prompt_tokens = t.n_computed, t.prompt_tokens
        pre_contexts = [int(n_computed[r]) for r in pre_rows]  # a few rows: scalar reads
        if any(n_new == 1 and c >= prompt_tokens[r] for r, n_new, c in zip(pre_rows, pre_q, pre_contexts)):
            return False  # a row past its prompt computing one token counts as decoding
        step_s = plan.duration_s
        if plan.cost_parts is not None and 1 not in pre_q:  # the step's own costing (`_decode_only_s`)
            dec_s = min(sched.decode_only_time_s((), plan), step_s)
        else:
            dec_s = min(self._decode_only_s(plan, n_computed[dec_rows].tolist(), sched), step_s)
        part["decode"][dec_rows] += dec_s
        part["interference"][dec_rows] += (end_s - dec_mark_s) - dec_s
        self.mark_s[dec_rows] = end_s
        spans_s = self._book_waits(pre_rows, [float(self.mark_s[r]) for r in pre_rows], start_s, end_s)
        share_s = (step_s - dec_s) / sum(pre_q)
        for row, c, n_new, span_s in zip(pre_rows, pre_contexts, pre_q, spans_s):
            self._book_prefill(row, c, n_new, share_s, span_s)
        self.mark_s[pre_rows] = end_s
        return True

    def _book_waits(self, rows: list[int], marks: list[float], start_s: float, end_s: float) -> list[float]:
        """`_account_wait` for a few rows; returns each row's span (end - where its work starts)."""
        fresh, queue, interference = self.fresh, self._part["queue"], self._part["interference"]
        spans_s = []
        for r, mark in zip(rows, marks):
            if abs(mark - start_s) <= SAME_INSTANT_S:  # ran in the step just before (NaN fails the test)
                spans_s.append(end_s - mark)
                continue
            spans_s.append(end_s - start_s)
            if fresh[r]:
                queue[r] += start_s - (self.table.arrival_s[r] if math.isnan(mark) else mark)
                fresh[r] = False
            else:
                interference[r] += start_s - mark
        return spans_s

    def _account_wait(self, rows: np.ndarray, start_s: float) -> np.ndarray:
        """Book each row's time since its last mark (or arrival) as queue (fresh rows) or
        interference (preempted time is moved out of it in `columns`); returns where each row's
        work in this step starts. A row that ran in the step just before (its mark is the step
        start up to rounding) is the common case and costs one comparison."""
        marks = self.mark_s[rows]
        same = np.abs(marks - start_s) <= SAME_INSTANT_S  # NaN (never ran) counts as a gap
        if same.all():
            return marks
        gap = ~same
        work_start_s = np.where(gap, start_s, marks)
        rows, marks = rows[gap], marks[gap]
        fresh = self.fresh[rows]
        if not fresh.any():
            self._part["interference"][rows] += start_s - marks
            return work_start_s
        unseen = np.isnan(marks)
        if unseen.any():
            marks = np.where(unseen, self.table.arrival_s[rows], marks)
        wait = start_s - marks
        self._part["queue"][rows[fresh]] += wait[fresh]
        self._part["interference"][rows[~fresh]] += wait[~fresh]
        self.fresh[rows] = False
        return work_start_s

    def columns(self, finished: np.ndarray, request_finish_s: np.ndarray) -> dict[str, np.ndarray]:
        """`attr_<part>_s` columns for the requests frame: NaN where the request did not finish.
        `request_finish_s` is each request's end over all its samples (the frame's finish_s).
        Preempted time (the table's `preempted_s`) was booked as waiting: it is taken out of
        interference (a preempted request had run before), and out of queue for any rest (one
        preempted on a decode replica before its first step there)."""
        parts = self.parts_s.copy()
        n = parts.shape[1]
        preempted = self.table.preempted_s[:n]
        from_interference = np.minimum(preempted, parts[_INDEX["interference"]])
        parts[_INDEX["interference"]] -= from_interference
        parts[_INDEX["queue"]] -= preempted - from_interference
        parts[_INDEX["preempted"]] = preempted
        own_finish_s = self.table.finish_s[:n]
        parts[_INDEX["samples"]] = np.where(finished, request_finish_s - own_finish_s, 0.0)
        parts[:, ~finished] = np.nan
        return {f"attr_{name}_s": parts[i] for i, name in enumerate(PARTS)}

    def book_tokenize(self, rows: np.ndarray, tokenize_s: np.ndarray) -> None:
        """Each of `rows`' time in the tokenizer (queueing there included) before the engine core saw it."""
        self.parts_s[_INDEX["tokenize"], rows] += tokenize_s

    def book_frontend(self, rows: np.ndarray, frontend_s: float) -> None:
        """The engine's request path outside the engine core (sim.engine.frontend) of `rows`."""
        self.parts_s[_INDEX["frontend"], rows] += frontend_s
