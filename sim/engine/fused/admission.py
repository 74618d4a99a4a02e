"""The continuous policy's queue, as the fused core keeps it: arrivals (and rejections of what can
never fit), first-come-first-served admission under seats, token budget, free blocks and the
kv_admission rule, swapped-out requests coming back, and the rejection of a head that can never
start. The rules are the reference stepper's (sim/engine/reference/continuous.py);
`FusedContinuous` holds the state these read."""

from __future__ import annotations

import math

from sim.engine.request import Status

WAITING, RUNNING, SWAPPED, FINISHED, REJECTED = (int(s) for s in (Status.WAITING, Status.RUNNING, Status.SWAPPED,
                                                                  Status.FINISHED, Status.REJECTED))


class ContinuousAdmission:
    """The queue half of `sim.engine.fused.continuous.FusedContinuous`."""

    # ------------------------------------------------------------------ arrivals and rejections
    def arrive(self, rid: int, arrival_s: float) -> None:
        """`rid` reaches the scheduler: it waits, or is rejected at its arrival if it can never fit."""
        prompt = self.prompt[rid]
        need = self.blocks_for(prompt + self.output[rid])
        if prompt >= self.max_model_len:
            self.reject(rid, f"prompt of {prompt} tokens leaves no room under max_model_len={self.max_model_len}",
                        arrival_s)
        elif need > self.n_blocks - self.watermark_blocks:
            self.reject(rid, f"prompt+output need {need} KV blocks; the cache holds {self.n_blocks}", arrival_s)
        else:
            self.status[rid] = WAITING
            self.waiting.append(rid)

    def arrive_or_hold(self, rid: int, arrival_s: float) -> None:
        """Asynchronous scheduling: an arrival while the last step ran is held back (it joins the step
        after the next); otherwise it arrives."""
        if self.async_scheduling and self.step_start_s < arrival_s <= self.step_end_s:
            self.pending.append((rid, arrival_s))
        else:
            self.arrive(rid, arrival_s)

    def hand_over(self, everyone: bool) -> None:
        """Held-back arrivals join the queue: those that arrived before the last step began computing
        (the step after it is being formed now), or all of them."""
        kept = []
        for rid, arrival_s in self.pending:
            if everyone or arrival_s < self.step_compute_start_s:
                self.arrive(rid, self.now_s)
            else:
                kept.append((rid, arrival_s))
        self.pending = kept

    def reject(self, rid: int, reason: str, at_s: float) -> None:
        self.status[rid] = REJECTED
        self.finish_s[rid] = at_s
        self.table.reject_reason[rid] = reason

    def reject_head(self) -> None:
        """Nothing runs and nothing could start: the head of the queue (else the oldest swapped-out
        request) never will."""
        if self.waiting:
            self.reject(self.waiting.popleft(), "could not be scheduled with the configured limits", self.now_s)
            return
        rid = self.swapped.popleft()
        self.n_cpu_free += self.held_cpu.pop(rid)
        self.preempted_at_s.pop(rid, None)
        self.reject(rid, "swapped out and could not come back: its blocks no longer fit with the configured limits",
                    self.now_s)

    # ------------------------------------------------------------------ admission
    def admit(self) -> list[tuple[int, int]]:
        """(request, tokens to prefill) of the waiting requests admitted now, first come first served."""
        admitted: list[tuple[int, int]] = []
        budget_used = 0
        cfg, waiting = self.cfg, self.waiting
        while waiting and not self.swapped and len(self.running) < cfg.max_num_seqs:
            rid = waiting[0]
            wanted = self.n_tokens[rid] - self.n_computed[rid]
            if admitted and budget_used + wanted > cfg.max_num_batched_tokens:
                break
            if self.reserve_full and not self.reserve(rid):
                break
            need = self.blocks_for(self.n_computed[rid] + wanted)  # a waiting request holds no blocks
            if need > self.n_free - self.watermark_blocks:  # a new request leaves the watermark free
                self.reserved_blocks -= self.reserved.pop(rid, 0)
                break
            self.n_free -= need
            waiting.popleft()
            self.start_running(rid)
            admitted.append((rid, wanted))
            budget_used += wanted
        return admitted

    def reserve(self, rid: int) -> bool:
        """reserve_full: `rid` starts only if the blocks it will hold at its end fit beside every admitted
        request's (the watermark kept free)."""
        if rid in self.reserved:
            return True
        final = self.blocks_for(self.final[rid])
        if self.reserved_blocks + final > self.n_blocks - self.watermark_blocks:
            return False
        self.reserved[rid] = final
        self.reserved_blocks += final
        return True

    def start_running(self, rid: int) -> None:
        self.status[rid] = RUNNING
        if math.isnan(self.scheduled_s[rid]):
            self.scheduled_s[rid] = self.now_s
        if rid in self.preempted_at_s:
            self.preempted_s[rid] += self.now_s - self.preempted_at_s.pop(rid)
        self.running.append(rid)

    def swap_in(self) -> float:
        """Bring swapped-out requests back, oldest first, while their blocks fit; the transfer seconds."""
        moved = 0
        while self.swapped and self.held_cpu[self.swapped[0]] <= self.n_free:
            rid = self.swapped.popleft()
            n = self.held_cpu.pop(rid)
            self.n_cpu_free += n
            self.n_free -= n
            moved += n
            self.start_running(rid)
            self.join_sums(rid, self.n_computed[rid], self.last_s[rid])
        return moved * self.swap_s_per_block
