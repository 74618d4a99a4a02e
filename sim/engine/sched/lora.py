"""LoRA adapters in a policy's batch (docs/lora.md): `with_lora(policy class)` is that policy with
vLLM's multi-LoRA rules mixed in; runs without `enable_lora` never see this module.

- Admission: a waiting request whose adapter would be one distinct adapter too many for `max_loras` is
  skipped and later requests may go first (vLLM V1's scheduler skips it and puts it back at the head of
  the queue afterwards); the time it spends skipped is its `adapter_wait_s`.
- Loads: the admission of an adapter without a GPU slot adds its load (sim/engine/lora.py) to the step.
- Step cost: every step adds the LoRA kernels of its tokens and distinct adapters (sim/cost/lora.py).
  Decode runs are priced step by step (one step per plan), as the kernels' cost depends on the batch."""

from __future__ import annotations

from collections import deque

import numpy as np

from sim.cost.lora import LoraStepCost
from sim.engine.lora import NO_ADAPTER, adapter_slots_of, row_adapters


class LoraScheduling:
    uses_waiting_order = True  # a later arrival may overtake a waiting request whose adapter has no slot

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.prices_runs_ahead = False
        self.lora = adapter_slots_of(self.cfg, self.cost)
        self.lora_cost = LoraStepCost(self.cost, self.cfg.max_lora_rank, self.cfg.tp)
        self.adapter_of, self.rank_of = row_adapters(self.table)
        if not hasattr(self.table, "adapter_wait_s"):  # shared by every replica of the run
            self.table.adapter_wait_s = np.zeros(self.adapter_of.shape[0])
        self._skipped_since: dict[int, float] = {}
        self._pending_load_s = 0.0

    def schedule(self, now_s: float, horizon_s: float):
        n_skipped, n_rest = self._put_admissible_first(now_s)
        plan = super().schedule(now_s, horizon_s)
        if n_skipped:  # vLLM puts the skipped back at the head of the queue after the step
            items = list(self.waiting)
            cut = len(items) - n_skipped - n_rest
            self.waiting = deque(items[cut:cut + n_skipped] + items[:cut] + items[cut + n_skipped:])
        return plan

    def _put_admissible_first(self, now_s: float) -> tuple[int, int]:
        """Order the queue's head: requests whose adapter may join first (in order, each admission counting
        its adapter in, as many as there are free seats), then those skipped for want of a slot, then the
        rest unseen. Records when each skipped request started waiting for a slot. Returns (skipped, rest)."""
        seats = self.cfg.max_num_seqs - len(self.running)
        skipped = self._skipped_rows(seats) if seats > 0 and self.waiting else ([], [], 0)
        front, back, n_rest = skipped
        waits, back_set = self.table.adapter_wait_s, set(back)
        for rid in [r for r in self._skipped_since if r not in back_set]:
            waits[rid] += now_s - self._skipped_since.pop(rid)
        for rid in back:
            self._skipped_since.setdefault(rid, now_s)
        if back:
            rest = list(self.waiting)[len(self.waiting) - n_rest:] if n_rest else []
            self.waiting = deque(front + back + rest)
        return len(back), n_rest

    def _skipped_rows(self, seats: int) -> tuple[list[int], list[int], int]:
        """(admissible rows, skipped rows, rows after them) of the waiting queue, looking no further than
        the `seats`-th admissible row."""
        rows = np.fromiter(self.waiting, dtype=np.int64, count=len(self.waiting))
        adapters = self.adapter_of[rows]
        active, limit = set(self.lora.in_use), self.lora.max_loras
        ok = np.ones(rows.shape[0], dtype=bool)
        i = 0
        while i < rows.shape[0] and len(active) < limit:  # slots left: each new adapter takes one
            if adapters[i] != NO_ADAPTER:
                active.add(int(adapters[i]))
            i += 1
        if i < rows.shape[0]:
            tail = adapters[i:]
            ok[i:] = (tail == NO_ADAPTER) | np.isin(tail, np.fromiter(active, dtype=np.int64, count=len(active)))
        admissible = ok.nonzero()[0]
        stop = int(admissible[seats - 1]) + 1 if admissible.shape[0] >= seats else rows.shape[0]
        head_rows, head_ok = rows[:stop], ok[:stop]
        return head_rows[head_ok].tolist(), head_rows[~head_ok].tolist(), rows.shape[0] - stop

    def try_admit(self, rid: int, budget_tokens: float, now_s: float):
        adapter = int(self.adapter_of[rid])
        if not self.lora.admissible(adapter):
            return None
        n_new = super().try_admit(rid, budget_tokens, now_s)
        if n_new is not None:
            self._pending_load_s += self.lora.admit(adapter, int(self.rank_of[rid]))
            since = self._skipped_since.pop(rid, None)
            if since is not None:  # its wait for a slot ends now
                self.table.adapter_wait_s[rid] += now_s - since
        return n_new

    def join_running(self, rid: int) -> None:
        super().join_running(rid)
        self.lora.join(int(self.adapter_of[rid]))

    def on_release(self, rid: int) -> None:
        super().on_release(rid)
        self.lora.leave(int(self.adapter_of[rid]))

    def decode_run(self, ids, now_s, horizon_s, transfer_s=0.0, first_step_grown=False, past_finishes=False):
        """One decode step (its blocks taken here unless the caller took them)."""
        if not first_step_grown:
            self._grow_run(ids, self.table.n_computed[np.array(ids, dtype=np.int64)], 1, 0)
        return self.single_step(list(ids), [1] * len(ids), transfer_s, n_decoding=len(ids))

    def single_step(self, ids, new_tokens, transfer_s: float = 0.0, n_decoding: int = 0):
        load_s, self._pending_load_s = self._pending_load_s, 0.0
        plan = super().single_step(ids, new_tokens, transfer_s + load_s, n_decoding)
        adapters = {int(a) for a in self.adapter_of[np.asarray(ids, dtype=np.int64)].tolist()} - {NO_ADAPTER}
        self.lora.max_batch_adapters = max(self.lora.max_batch_adapters, len(adapters))
        kernels_s = self.lora_cost.step_s(int(sum(new_tokens)), len(adapters))
        if kernels_s:
            plan.step_times_s = plan.step_times_s + kernels_s
            plan.duration_s += kernels_s
        return plan


_CLASSES: dict[type, type] = {}


def with_lora(policy: type) -> type:
    """`policy` with the multi-LoRA rules mixed in (one class per policy)."""
    if policy not in _CLASSES:
        _CLASSES[policy] = type(f"Lora{policy.__name__}", (LoraScheduling, policy), {})
    return _CLASSES[policy]
