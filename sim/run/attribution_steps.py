"""Latency attribution one step at a time: the rule in sim/run/attribution.py's docstring, written out
plainly for the reference stepper (sim/engine/reference; every row of every step, no decode runs, no
array or scalar twins). It keeps its parts in an `Attribution`'s arrays, so the requests table's
`attr_*_s` columns (and the preempted-time correction) come from `Attribution.columns`, as an engine
run's do. `sim.run.reference` hands one to the stepper, as `simulate` hands the engine's recorder
its `Attribution`."""

from __future__ import annotations

import math

import numpy as np

from sim.run.attribution import SAME_INSTANT_S, Attribution


class StepAttribution(Attribution):
    """An `Attribution` fed one committed step at a time by the reference stepper; `cost` prices a
    decode-only step (`cost.step_time_s`)."""

    def __init__(self, table, cost):
        super().__init__(table)
        self.cost = cost

    def decode_only_s(self, contexts: list[int]) -> float:
        """The time of a step that decodes sequences with these contexts and nothing else."""
        n = len(contexts)
        return float(self.cost.step_time_s(np.ones(n, dtype=np.int64), np.array(contexts, dtype=np.int64), n))

    def step(self, ids: list[int], new_tokens: list[int], cached: list[int], start_s: float, end_s: float,
             transfer_s: float, step_s: float) -> None:
        """Book one step of `ids` (computing `new_tokens` over `cached` tokens each) that ran from
        `start_s` to `end_s`: `transfer_s` of host-link traffic first, then `step_s` of compute.
        Called before the step's tokens move into the cache."""
        t, part = self.table, self._part
        prefilling = [q != 1 or c < int(t.prompt_tokens[rid]) for rid, q, c in zip(ids, new_tokens, cached)]
        dec_s = 0.0
        if any(prefilling) and not all(prefilling):
            dec_s = min(self.decode_only_s([c for c, pre in zip(cached, prefilling) if not pre]), step_s)
        prefill_tokens = sum(q for q, pre in zip(new_tokens, prefilling) if pre)
        share_s = (step_s - dec_s) / prefill_tokens if prefill_tokens else 0.0
        for rid, q, c, pre in zip(ids, new_tokens, cached, prefilling):
            span_s = self.wait_before(rid, start_s, end_s)
            if transfer_s:
                part["swap"][rid] += transfer_s
                span_s -= transfer_s
            if pre:
                self._book_prefill(rid, c, q, share_s, span_s)
            elif prefill_tokens:  # decoding beside prefills: a decode-only step's time, the rest is others'
                part["decode"][rid] += dec_s
                part["interference"][rid] += span_s - dec_s
            else:
                part["decode"][rid] += span_s
            self.mark_s[rid] = end_s

    def wait_before(self, rid: int, start_s: float, end_s: float) -> float:
        """Book `rid`'s time since its last step (or arrival) as queue (before its first step) or
        interference; returns its work span in this step (from its last mark when it ran in the
        step just before, else from the step's start)."""
        mark_s = float(self.mark_s[rid])
        if abs(mark_s - start_s) <= SAME_INSTANT_S:  # NaN (never ran) fails the test
            return end_s - mark_s
        if self.fresh[rid]:
            self._part["queue"][rid] += start_s - (float(self.table.arrival_s[rid]) if math.isnan(mark_s) else mark_s)
            self.fresh[rid] = False
        else:
            self._part["interference"][rid] += start_s - mark_s
        return end_s - start_s
