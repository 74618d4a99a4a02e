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

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from sim.request import RequestTable
    from sim.sched.base import Scheduler
    from sim.sched.plan import StepPlan

PARTS = ("queue", "prefill", "interference", "decode", "preempted", "recompute", "swap", "kv_transfer",
         "samples")
_INDEX = {name: i for i, name in enumerate(PARTS)}
SAME_INSTANT_S = 1e-9  # a mark this close to a step's start is that start (float rounding of end - duration)


class Attribution:
    """Per-request time parts, accumulated at every committed plan (shared by all replicas)."""

    def __init__(self, table: RequestTable):
        n = table.n_requests
        self.table = table
        self.parts_s = np.zeros((len(PARTS), n))
        self.mark_s = np.full(n, np.nan)  # end of the last step the request was in (NaN: none yet)
        self.seen = np.zeros(n, dtype=bool)
        self.requeued = np.zeros(n, dtype=bool)  # handed to a new replica: waiting there is queueing
        self.high_water = np.zeros(n, dtype=np.int64)  # most tokens ever computed (recompute below it)
        self._preempted_counted_s = np.zeros(n)
        self._transfer_counted_s = np.zeros(n)
        self._all_own_rows = table.sample_of.shape[0] == n  # no extra sample rows to leave out
        self._decode_s = self.parts_s[_INDEX["decode"]]  # a view: the part every decode run adds to

    def requeue(self, rid: int) -> None:
        """The request moves to another replica (disaggregation): its next wait there is queueing."""
        if rid < self.seen.shape[0]:
            self.requeued[rid] = True

    def on_plan(self, plan: StepPlan, end_s: float, sched: Scheduler) -> None:
        """Account a plan about to be committed at `end_s` (call BEFORE the commit mutates tokens)."""
        rows = plan.req_ids
        n = self.seen.shape[0]
        if rows.size == 0:
            return
        q = plan.new_tokens
        if not self._all_own_rows:
            own = rows < n
            if not own.all():
                rows, q = rows[own], q[own]
                if rows.size == 0:
                    return
        start_s = end_s - plan.duration_s
        # work span per row = end - (its last mark, or the step start after a real wait): the
        # parts telescope exactly, and consecutive steps need no wait bookkeeping
        span_s = end_s - self._account_wait(rows, start_s)
        p = self.parts_s
        if plan.transfer_s:
            p[_INDEX["swap"], rows] += plan.transfer_s
            span_s = span_s - plan.transfer_s
        contexts = self.table.n_computed[rows]
        if plan.is_decode_run:  # the hot case: one token per sequence per step
            self._decode_s[rows] += span_s
            reached = contexts + plan.n_steps
        else:
            self._split_step(rows, q, contexts, span_s, plan.duration_s - plan.transfer_s, sched)
            reached = contexts + q * plan.n_steps
        self.mark_s[rows] = end_s
        self.high_water[rows] = np.maximum(self.high_water[rows], reached)

    def _account_wait(self, rows: np.ndarray, start_s: float) -> np.ndarray:
        """Split each row's time since its last step (or arrival) into waiting parts; returns where
        each row's work in this step starts. A row that ran in the step just before (its mark is
        the step start up to rounding) is the common case and costs one comparison."""
        marks = self.mark_s[rows]
        same = np.abs(marks - start_s) <= SAME_INSTANT_S  # NaN (never ran) is never the same
        if same.all():
            return marks
        gap = ~same
        work_start_s = np.where(gap, start_s, marks)
        rows = rows[gap]
        t, p = self.table, self.parts_s
        seen = self.seen[rows]
        wait = start_s - np.where(seen, marks[gap], t.arrival_s[rows])
        preempted_now_s, transfer_now_s = t.preempted_s[rows], t.kv_transfer_s[rows]
        preempted = preempted_now_s - self._preempted_counted_s[rows]
        transfer = transfer_now_s - self._transfer_counted_s[rows]
        self._preempted_counted_s[rows] = preempted_now_s
        self._transfer_counted_s[rows] = transfer_now_s
        rest = wait - preempted - transfer
        p[_INDEX["preempted"], rows] += preempted
        p[_INDEX["kv_transfer"], rows] += transfer
        requeued = self.requeued[rows]
        if seen.all() and not requeued.any():  # the common case: running requests that sat out steps
            p[_INDEX["interference"], rows] += rest
            return work_start_s
        queued = ~seen | requeued
        p[_INDEX["queue"], rows] += np.where(queued, rest, 0.0)
        p[_INDEX["interference"], rows] += np.where(queued, 0.0, rest)
        self.seen[rows] = True
        self.requeued[rows] = False
        return work_start_s

    def _split_step(self, rows, q, contexts, span_s: np.ndarray, step_s: float, sched: Scheduler) -> None:
        p = self.parts_s
        prefilling = np.flatnonzero((q != 1) | (contexts < self.table.prompt_tokens[rows]))
        if prefilling.size == 0:
            p[_INDEX["decode"], rows] += span_s
            return
        dec_s = 0.0
        if prefilling.size < rows.size:
            decoding = np.ones(rows.size, dtype=bool)
            decoding[prefilling] = False
            dec_rows = rows[decoding]
            dec_s = min(sched.decode_only_time_s(contexts[decoding]), step_s)
            p[_INDEX["decode"], dec_rows] += dec_s
            p[_INDEX["interference"], dec_rows] += span_s[decoding] - dec_s
        # prefilling sequences are few per step: plain Python
        pre_q = q[prefilling].tolist()
        share_s = (step_s - dec_s) / sum(pre_q)
        for i, n_new in zip(prefilling.tolist(), pre_q):
            row = int(rows[i])
            own_s = share_s * n_new
            redo = min(max(int(self.high_water[row] - contexts[i]), 0), n_new)
            redo_s = own_s * redo / n_new
            p[_INDEX["recompute"], row] += redo_s
            p[_INDEX["prefill"], row] += own_s - redo_s
            p[_INDEX["interference"], row] += span_s[i] - own_s

    def columns(self, finished: np.ndarray, request_finish_s: np.ndarray) -> dict[str, np.ndarray]:
        """`attr_<part>_s` columns for the requests frame: NaN where the request did not finish.
        `request_finish_s` is each request's end over all its samples (the frame's finish_s)."""
        parts = self.parts_s.copy()
        own_finish_s = self.table.finish_s[: parts.shape[1]]
        parts[_INDEX["samples"]] = np.where(finished, request_finish_s - own_finish_s, 0.0)
        parts[:, ~finished] = np.nan
        return {f"attr_{name}_s": parts[i] for i, name in enumerate(PARTS)}


def attribution_summary(frame: pd.DataFrame) -> dict | None:
    """For summary.json (one flat level): `mean_<part>_s` over finished requests, and for the p50
    and p99 requests by e2e (nearest rank) `p50_request_id`, `p50_e2e_s`, `p50_<part>_s` (same for
    p99). None when no request finished."""
    done = frame[frame["status"] == "FINISHED"]
    columns = [f"attr_{name}_s" for name in PARTS]
    if done.empty or columns[0] not in done:
        return None
    order = np.argsort(done["e2e_s"].to_numpy(), kind="stable")
    out: dict = {f"mean_{name}_s": float(done[c].mean()) for name, c in zip(PARTS, columns)}
    for label, quantile in (("p50", 0.5), ("p99", 0.99)):
        rank = max(int(np.ceil(quantile * len(done))) - 1, 0)
        row = done.iloc[order[rank]]
        out[f"{label}_request_id"] = int(row["request_id"])
        out[f"{label}_e2e_s"] = float(row["e2e_s"])
        out.update({f"{label}_{name}_s": float(row[c]) for name, c in zip(PARTS, columns)})
    return out
