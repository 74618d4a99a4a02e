"""How one step's time is split among its sequences (prefill, recompute, decode, interference): the
rule in sim/run/attribution.py's docstring, a mixin of its `Attribution`."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sim.engine.sched.base import Scheduler
    from sim.engine.sched.plan import StepPlan

FEW_ROWS = 4  # steps of at most this many own rows are read and marked row by row (a gather costs more)


class StepSplit:
    def _split_step_scalar(self, rows: list[int], q: list[int], spans_s: list[float], plan: StepPlan,
                           sched: Scheduler) -> None:
        """`_split_step` for a few rows (same arithmetic per row)."""
        t, part = self.table, self._part
        step_s = plan.duration_s - plan.transfer_s
        if len(rows) <= FEW_ROWS:
            contexts, prompts = list(map(t.n_computed.item, rows)), list(map(t.prompt_tokens.item, rows))
        else:
            contexts, prompts = t.n_computed[rows].tolist(), t.prompt_tokens[rows].tolist()
        prefilling = [i for i, (n_new, c, prompt) in enumerate(zip(q, contexts, prompts)) if n_new != 1 or c < prompt]
        if not prefilling:
            part["decode"][rows] += spans_s
            return
        dec_s = 0.0
        if len(prefilling) < len(rows):
            is_prefilling = set(prefilling)
            decoding = [i for i in range(len(rows)) if i not in is_prefilling]
            dec_s = min(self._decode_only_s(plan, [contexts[i] for i in decoding], sched), step_s)
            dec_rows = [rows[i] for i in decoding]
            part["decode"][dec_rows] += dec_s
            part["interference"][dec_rows] += np.array([spans_s[i] for i in decoding]) - dec_s
        pre_q = [q[i] for i in prefilling]
        share_s = (step_s - dec_s) / sum(pre_q)
        for i, n_new in zip(prefilling, pre_q):
            self._book_prefill(rows[i], contexts[i], n_new, share_s, spans_s[i])

    @staticmethod
    def _decode_only_s(plan: StepPlan, contexts, sched: Scheduler) -> float:
        """Time of a step of the decoding rows alone; the plan's own costing is reused when its
        new-token-1 rows are exactly those (not when a prompt's last token, chunked, is prefill here,
        or sample rows were left out)."""
        same_rows = len(contexts) == int(np.count_nonzero(plan.new_tokens == 1))
        return sched.decode_only_time_s(contexts, plan if same_rows else None)

    def _book_prefill(self, row: int, computed: int, n_new: int, share_s: float, span_s: float) -> None:
        """A prefilling row's own share of a step (prefill, or recompute below its high-water mark)
        and the rest of its span (interference)."""
        t, part = self.table, self._part
        own_s = share_s * n_new
        done_before = int(self.high_water[row])
        if not math.isnan(t.first_token_s[row]):  # recomputing after a preemption: all but the last token
            done_before = max(done_before, int(t.n_tokens[row]) - 1)
        redo = min(max(done_before - computed, 0), n_new)
        redo_s = own_s * redo / n_new
        part["recompute"][row] += redo_s
        part["prefill"][row] += own_s - redo_s
        part["interference"][row] += span_s - own_s
        self.high_water[row] = max(done_before, computed + n_new)

    def _split_step(self, rows, q, span_s: np.ndarray, plan: StepPlan, sched: Scheduler) -> None:
        t, part = self.table, self._part
        step_s = plan.duration_s - plan.transfer_s
        contexts = t.n_computed[rows]
        prefilling = np.flatnonzero((q != 1) | (contexts < t.prompt_tokens[rows]))
        if prefilling.size == 0:
            part["decode"][rows] += span_s
            return
        dec_s = 0.0
        if prefilling.size < rows.size:
            decoding = np.ones(rows.size, dtype=bool)
            decoding[prefilling] = False
            dec_rows = rows[decoding]
            dec_s = min(self._decode_only_s(plan, contexts[decoding], sched), step_s)
            part["decode"][dec_rows] += dec_s
            part["interference"][dec_rows] += span_s[decoding] - dec_s
        # prefilling sequences are few per step: plain Python
        pre_q = q[prefilling].tolist()
        share_s = (step_s - dec_s) / sum(pre_q)
        for i, n_new in zip(prefilling.tolist(), pre_q):
            self._book_prefill(int(rows[i]), int(contexts[i]), n_new, share_s, float(span_s[i]))
