"""A request arriving at a replica's scheduler: queued, or rejected at once when it can never fit
(prompt beyond max_model_len, or more KV blocks than the whole cache), and the rejection of a head
of queue that can never start. A mixin of the scheduler base (sim/engine/sched/base.py), whose
table, blocks, queues and listener it uses."""

from __future__ import annotations

from sim.engine.request import Status


class Arrivals:
    """Arrival and rejection: `add`, `never_fits`, `reject_unschedulable`."""

    def add(self, rid: int, now_s: float) -> None:
        """A request arrives: queue it, or reject it now if it can never fit."""
        t = self.table
        if rid in t.children:
            t.replica[t.rows_of(rid)] = self.replica
        else:
            t.replica[rid] = self.replica
        reason = self.never_fits(rid)
        if reason is not None:
            self._reject(rid, reason, now_s)
            return
        t.status[rid] = Status.WAITING
        self.waiting.append(rid)

    def never_fits(self, rid: int) -> str | None:
        t, b = self.table, self.blocks
        prompt = int(t.prompt_tokens[rid])
        if prompt >= self.max_model_len:
            return f"prompt of {prompt} tokens leaves no room under max_model_len={self.max_model_len}"
        total = prompt + self.output_tokens_held(rid)
        n_samples = len(t.rows_of(rid))
        shared = prompt // b.block_size  # full prompt blocks all samples share
        need = shared + n_samples * (-(-total // b.block_size) - shared)
        if need > b.n_blocks - b.watermark_blocks:
            return f"prompt+output need {need} KV blocks; the cache holds {b.n_blocks}"
        return None

    def output_tokens_held(self, rid: int) -> int:
        """Output tokens whose KV `rid` keeps in this replica's cache: all of them (a disaggregated
        prefill replica keeps none: sim/engine/disagg/roles.py)."""
        return int(self.table.output_tokens[rid])

    def _reject(self, rid: int, reason: str, now_s: float) -> None:
        t = self.table
        t.reject(rid, reason, now_s)
        if self.finished_listener is not None and t.is_request_done(rid):
            self.finished_listener(int(t.sample_of[rid]))

    def reject_unschedulable(self, now_s: float) -> None:
        """Nothing runs yet the head of the queue cannot start (or, nothing waiting, the oldest
        swapped-out request cannot come back): reject it rather than wait forever."""
        if self.waiting:
            self._reject(self.waiting.popleft(), "could not be scheduled with the configured limits", now_s)
            return
        rid = self.swapped.popleft()
        self.blocks.free_request(rid)
        self._preempted_at.pop(rid, None)
        self._reject(rid, "swapped out and could not come back: its blocks no longer fit with the configured "
                          "limits", now_s)
