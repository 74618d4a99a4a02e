"""How a sequence joins and leaves the fused core's running batch (sim/engine/fused/continuous.py
explains the sums): its offset, block residue, finish step, cohort and energy mark; preemption and
finishing."""

from __future__ import annotations

import heapq

from sim.engine.fused.admission import FINISHED, SWAPPED, WAITING


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

    # ------------------------------------------------------------------ preemption, finishing
    def preempt(self, rid: int) -> float:
        """Swap `rid` out to host memory (when its blocks fit there and the mode is swap) or drop its KV
        to recompute it later, first in the queue. Returns the swap transfer seconds."""
        computed = self.leave_sums(rid)
        self.preemptions[rid] += 1
        self.record.preemptions += 1
        self.preempted_at_s[rid] = self.now_s
        self.reserved_blocks -= self.reserved.pop(rid, 0)
        n_held = self.blocks_for(computed)
        self.n_free += n_held
        if self.swap_mode and self.n_cpu_free >= n_held:
            self.n_cpu_free -= n_held
            self.held_cpu[rid] = n_held
            self.n_computed[rid] = computed
            self.status[rid] = SWAPPED
            self.swapped.append(rid)
            return n_held * self.swap_s_per_block
        self.n_computed[rid] = 0
        self.status[rid] = WAITING
        self.waiting.appendleft(rid)
        return 0.0

    def finish(self, rid: int, end_s: float) -> None:
        computed = self.leave_sums(rid)
        self.n_computed[rid] = computed
        self.reserved_blocks -= self.reserved.pop(rid, 0)
        self.n_free += self.blocks_for(computed)
        self.status[rid] = FINISHED
        self.finish_s[rid] = end_s
