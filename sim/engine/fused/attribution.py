"""Latency attribution in the fused core: the rule in sim/run/attribution.py's docstring (the reference
stepper applies it step by step, sim/engine/reference/attribution.py) kept as running sums.

Under the continuous policy a step either prefills the admitted requests (each books its wait and
its share of the step as the reference does, one request at a time) or decodes every running one.
So a running sequence's time from joining the batch (its prefill's end, or its swap-in) to leaving
it (finish or preemption) is, step by step, either a prefill step it sat out (interference), the
host-link transfer at the start of a decode step it was in (swap), or decode. Two running totals
over the whole run, the seconds of prefill steps and of decode steps' transfers, give the first two
as a difference between leaving and joining; decode is the rest of the interval. Nothing is
written per sequence per decode step. The sums differ from the reference's step-by-step ones by
rounding only (held to 1e-12 of the run's clock by tests/test_reference_stepper.py). The parts become
an `Attribution` (the requests table's `attr_*_s` columns) in `sim.run.fused`."""

from __future__ import annotations

import math

OWN_PARTS = ("queue", "prefill", "interference", "decode", "recompute", "swap")  # the parts the core books


class FusedAttribution:
    """The attribution half of `sim.engine.fused.continuous.FusedContinuous` (its state is set by
    `start_attribution`; `attributing` False skips every hook)."""

    def start_attribution(self, n: int, on: bool) -> None:
        self.attributing = on
        if not on:
            return
        self.attr = {name: [0.0] * n for name in OWN_PARTS}
        self.mark_s = [math.nan] * n  # when the request left its last step (NaN: none yet)
        self.high_water = [0] * n  # prompt tokens computed so far (recompute below it)
        self.joined_s = [0.0] * n  # when it joined the running batch
        self.sat_out_at_s = [0.0] * n  # `sat_out_s` then
        self.transfer_at_s = [0.0] * n  # `decode_transfer_s` then
        self.sat_out_s = 0.0  # seconds of prefill steps so far (running sequences sit them out)
        self.decode_transfer_s = 0.0  # seconds of host-link transfer at the start of decode steps so far

    def attribute_prefill(self, ids: list[int], new_tokens: list[int], start_s: float, end_s: float,
                          transfer_s: float, step_s: float) -> None:
        """A prefill step of the admitted `ids` (each prefilling `new_tokens` from nothing cached), booked
        before its tokens move into the cache; then the running sequences' time in it is theirs to sit out."""
        attr, mark_s, high_water = self.attr, self.mark_s, self.high_water
        queue, interference = attr["queue"], attr["interference"]
        share_s = step_s / sum(new_tokens)
        arrivals = self.table.arrival_s
        for rid, n_new in zip(ids, new_tokens):
            mark = mark_s[rid]
            if math.isnan(mark):  # its first step: the wait since arrival is queueing
                queue[rid] += start_s - float(arrivals[rid])
            else:  # back after a preemption (its marks are whole steps apart from this start)
                interference[rid] += start_s - mark
            span_s = end_s - start_s
            if transfer_s:
                attr["swap"][rid] += transfer_s
                span_s -= transfer_s
            own_s = share_s * n_new
            done_before = high_water[rid]
            if not math.isnan(self.first_s[rid]):  # recomputing after a preemption: all but the last token
                done_before = max(done_before, self.n_tokens[rid] - 1)
            redo = min(max(done_before, 0), n_new)  # nothing is cached when a prefill starts
            redo_s = own_s * redo / n_new
            attr["recompute"][rid] += redo_s
            attr["prefill"][rid] += own_s - redo_s
            interference[rid] += span_s - own_s
            high_water[rid] = max(done_before, n_new)
            mark_s[rid] = end_s
        self.sat_out_s += end_s - start_s

    def attribute_mixed(self, ids: list[int], new_tokens: list[int], cached: list[int], start_s: float, end_s: float,
                        transfer_s: float, step_s: float, decode_only_s) -> None:
        """Chunked prefill: a step in which every sequence of the running sums decodes and `ids` compute
        `new_tokens` over `cached` (prompt chunks, or a token of a row that counts as decoding: one
        token past its prompt). `decode_only_s(contexts of those rows)`: the time of a step decoding
        them and the batch alone. The batch's share: decode that time, the rest of the step is others'
        (interference), the transfer swap. Booked before the step's tokens move into the cache."""
        attr, mark_s, prompt = self.attr, self.mark_s, self.prompt
        pre = [q != 1 or c < prompt[rid] for rid, q, c in zip(ids, new_tokens, cached)]
        prefill_tokens = sum(q for q, is_pre in zip(new_tokens, pre) if is_pre)
        dec_s = 0.0
        if prefill_tokens and (len(self.running) > len(self.prefilling) or not all(pre)):
            dec_s = min(decode_only_s([c for c, is_pre in zip(cached, pre) if not is_pre]), step_s)
        if prefill_tokens:
            self.sat_out_s += step_s - dec_s
        self.decode_transfer_s += transfer_s
        share_s = (step_s - dec_s) / prefill_tokens if prefill_tokens else 0.0
        for rid, q, c, is_pre in zip(ids, new_tokens, cached, pre):
            mark = mark_s[rid]
            if mark != start_s:  # it did not run in the step just before
                attr["queue" if math.isnan(mark) else "interference"][rid] += \
                    start_s - (float(self.table.arrival_s[rid]) if math.isnan(mark) else mark)
            span_s = end_s - start_s
            if transfer_s:
                attr["swap"][rid] += transfer_s
                span_s -= transfer_s
            if is_pre:
                self.book_own_share(rid, c, q, share_s, span_s)
            elif prefill_tokens:
                attr["decode"][rid] += dec_s
                attr["interference"][rid] += span_s - dec_s
            else:
                attr["decode"][rid] += span_s
            mark_s[rid] = end_s

    def book_own_share(self, rid: int, computed: int, n_new: int, share_s: float, span_s: float) -> None:
        """A prefilling row's own share of a step (prefill, or recompute below its high-water mark) and the
        rest of its span (interference): `Attribution._book_prefill`'s arithmetic."""
        attr = self.attr
        own_s = share_s * n_new
        done_before = self.high_water[rid]
        if not math.isnan(self.first_s[rid]):  # recomputing after a preemption: all but the last token
            done_before = max(done_before, self.n_tokens[rid] - 1)
        redo = min(max(done_before - computed, 0), n_new)
        redo_s = own_s * redo / n_new
        attr["recompute"][rid] += redo_s
        attr["prefill"][rid] += own_s - redo_s
        attr["interference"][rid] += span_s - own_s
        self.high_water[rid] = max(done_before, computed + n_new)

    def attribute_join(self, rid: int) -> None:
        """`rid` joins the running batch now (after its prefill, or swapped back in: its wait since its
        last step is interference, the preempted part of which `Attribution.columns` moves out)."""
        now_s = self.now_s
        self.attr["interference"][rid] += now_s - self.mark_s[rid]
        self.joined_s[rid] = now_s
        self.sat_out_at_s[rid] = self.sat_out_s
        self.transfer_at_s[rid] = self.decode_transfer_s

    def attribute_leave(self, rid: int) -> None:
        """`rid` leaves the running batch now (finished at a step's end, or preempted before a step)."""
        now_s, attr = self.now_s, self.attr
        sat_out_s = self.sat_out_s - self.sat_out_at_s[rid]
        transfer_s = self.decode_transfer_s - self.transfer_at_s[rid]
        attr["interference"][rid] += sat_out_s
        attr["swap"][rid] += transfer_s
        attr["decode"][rid] += (now_s - self.joined_s[rid]) - sat_out_s - transfer_s
        self.mark_s[rid] = now_s
