"""How a sequence joins and leaves the fused core's running batch (sim/engine/fused/continuous.py
explains the sums): its offset, block residue, finish step, cohort and energy mark."""

from __future__ import annotations

import heapq


class RunningSums:
    """The batch-sums half of `sim.engine.fused.continuous.FusedContinuous`."""

    def join_sums(self, rid: int, computed: int, last_s: float) -> None:
        """`rid` (running, `computed` tokens cached, its last token sampled at `last_s`) joins the sums."""
        offset = computed - self.d
        self.offset[rid] = offset
        self.entered_d[rid] = self.d
        self.last_s[rid] = last_s
        self.joined_at_j[rid] = self.per_sequence_j
        self.residues[offset % self.block_size] += 1
        self.offset_sum += offset
        self.cohorts[last_s] = self.cohorts.get(last_s, 0) + 1
        heapq.heappush(self.finish_heap, (self.final[rid] - 1 - offset, self.generation[rid], rid))
        if self.attributing:
            self.attribute_join(rid)

    def leave_sums(self, rid: int) -> int:
        """`rid` leaves the running batch; returns its cached tokens (its last token time is kept)."""
        offset = self.offset[rid]
        self.generation[rid] += 1
        if self.attributing:
            self.attribute_leave(rid)
        if self.energy is not None:
            self.table.energy_decode_j[rid] += self.per_sequence_j - self.joined_at_j[rid]
        self.residues[offset % self.block_size] -= 1
        self.offset_sum -= offset
        if self.d > self.entered_d[rid]:  # it decoded since joining: its last token is the last step's
            self.last_s[rid] = self.last_decode_end_s
        last_s = self.last_s[rid]
        left = self.cohorts[last_s] - 1
        if left:
            self.cohorts[last_s] = left
        else:
            del self.cohorts[last_s]
        self.running.remove(rid)
        computed = offset + self.d
        self.n_tokens[rid] = computed + 1  # it sampled one token past its cache
        return computed
