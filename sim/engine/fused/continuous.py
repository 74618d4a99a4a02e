"""The continuous policy (vLLM v0 style, prefills first) on one replica as one flat loop.

The rules are the reference stepper's (sim/engine/reference/continuous.py, which says them step by
step); this module keeps their state as running sums so a decode step costs a few Python operations
whatever the batch:

- the decode clock `d` counts decode steps; a running sequence's cached tokens are `offset + d`,
  so the batch's context is `sum of offsets + n * d` and nothing is written per sequence per step;
- a sequence needs a new KV block in the step where its cached tokens are a multiple of the block
  size: a histogram of offsets modulo the block size gives how many do, in one look-up;
- a heap holds the decode step at which each sequence reaches its last token;
- running sequences that sampled their last token at the same instant form one cohort, and a step
  records one (gap, count) pair per cohort (after a decode step there is one cohort);
- the recorder's sums (busy time, KV utilisation and fragmentation integrals) are kept inline, energy
  through one running per-sequence total (energy.py), attribution through two (attribution.py).

Admissions, prefills, preemptions, swaps and finishes are handled as they happen, one sequence at
a time, as the reference does. Under asynchronous scheduling an arrival during a step is held back
as the reference holds it, and decode steps go one per call while any is held.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable

import numpy as np

from sim.engine.fused.admission import ContinuousAdmission
from sim.engine.fused.attribution import FusedAttribution
from sim.engine.fused.energy import fused_energy
from sim.engine.fused.pricing import DecodePrice
from sim.engine.fused.record import FusedRecord
from sim.engine.fused.sums import RunningSums
from sim.engine.request import RequestTable
from sim.inputs.config import EngineConfig


class FusedContinuous(ContinuousAdmission, RunningSums, FusedAttribution):
    """One replica replaying `table` (rows in arrival order) under the continuous policy.
    `decode_price(n, context_tokens, kv_blocks)` prices a decode step (sim.engine.fused.pricing);
    None prices every step through `cost.step_time_s`."""

    def __init__(self, cfg: EngineConfig, table: RequestTable, cost, n_blocks: int, n_cpu_blocks: int,
                 swap_s_per_block: float, max_model_len: int, decode_price: DecodePrice | None,
                 record_steps: bool = False, async_scheduling: bool = False,
                 progress: Callable[[int, int], None] | None = None):
        self.progress = progress  # (arrived, all), every 1000 arrivals as the engine's arrival source calls it
        self.cfg, self.table, self.cost, self.max_model_len = cfg, table, cost, max_model_len
        self.decode_price, self.record_steps = decode_price, record_steps
        self.block_size = cfg.block_size
        self.n_blocks, self.watermark_blocks = n_blocks, int(cfg.watermark * n_blocks)
        self.n_free, self.n_cpu_free = n_blocks, n_cpu_blocks
        self.swap_s_per_block = swap_s_per_block
        self.reserve_full = cfg.kv_admission == "reserve_full"
        self.swap_mode = cfg.preemption_mode == "swap"
        n = table.n_requests
        self.prompt, self.output = table.prompt_tokens.tolist(), table.output_tokens.tolist()
        self.final = table.final_tokens.tolist()
        # per request (written back to the table at the end)
        self.status = table.status.tolist()
        # of a request that is not running; a running one's are offset + d and offset + d + 1
        self.n_computed = [0] * n
        self.n_tokens = list(self.prompt)
        self.first_s, self.last_s, self.finish_s, self.scheduled_s = ([math.nan] * n for _ in range(4))
        self.preemptions, self.preempted_s = [0] * n, [0.0] * n
        self.preempted_at_s: dict[int, float] = {}
        self.held_cpu: dict[int, int] = {}
        self.reserved: dict[int, int] = {}
        self.reserved_blocks = 0
        # the running batch as sums
        self.d = 0  # decode steps so far
        self.offset = [0] * n  # running: cached tokens - d
        self.entered_d = [0] * n  # d when it joined the running sums (its last token then: last_s)
        self.generation = [0] * n  # bumped as it leaves the sums: stale heap entries are skipped
        self.residues = [0] * self.block_size  # running sequences per offset modulo the block size
        self.offset_sum = 0
        self.finish_heap: list[tuple[int, int, int]] = []  # (d at which it finishes, generation, request)
        self.cohorts: dict[float, int] = {}  # last token time -> running sequences that sampled then
        self.last_decode_end_s = -math.inf
        self.waiting: deque[int] = deque()
        self.running: list[int] = []
        self.prefilling: list[int] = []  # running outside the sums (chunked prefill: sim/engine/fused/chunked.py)
        self.swapped: deque[int] = deque()
        self.now_s = 0.0
        self.async_scheduling = async_scheduling
        self.pending: list[tuple[int, float]] = []  # (request, arrival) held back a step (async scheduling)
        self.step_start_s = self.step_end_s = self.step_compute_start_s = -math.inf  # the last step's
        self.record = FusedRecord(n_blocks, cfg.block_size)
        self.energy, self.record.energy_missing = fused_energy(cost, table)
        self.record.energy = None if self.energy is None else self.energy.tally
        self.per_sequence_j, self.joined_at_j = 0.0, [0.0] * n  # decode joules each sequence got (energy.py)
        self.busy_s = self.kv_util_time = self.kv_waste_time = 0.0
        self.n_steps = 0
        self.start_attribution(n, cfg.latency_attribution)

    def blocks_for(self, n_tokens: int) -> int:
        return -(-n_tokens // self.block_size)

    # ------------------------------------------------------------------ the loop
    def run(self) -> float:
        """Replay every request; returns when the last event happened (a step's end or an arrival)."""
        arrivals = self.table.arrival_s[: self.table.n_requests].tolist()
        n = len(arrivals)
        next_row = 0
        waiting, running, swapped = self.waiting, self.running, self.swapped  # (the same objects all run)
        while True:
            now_s = self.now_s
            while next_row < n and arrivals[next_row] <= now_s:
                self.arrive_or_hold(next_row, arrivals[next_row])
                next_row += 1
                if self.progress is not None and next_row % 1000 == 0:
                    self.progress(next_row, n)
            if self.pending:
                self.hand_over(everyone=False)
            if not (waiting or running or swapped):
                if self.pending:
                    self.hand_over(everyone=True)
                    continue
                if next_row == n:
                    break
                self.now_s = max(now_s, arrivals[next_row])  # idle until it arrives
                continue
            if self.step(arrivals[next_row] if next_row < n else math.inf):
                pass
            elif self.pending:  # nothing else can run: the held-back arrivals join now
                self.hand_over(everyone=True)
            else:
                self.reject_head()
        self.write_back()
        return max(self.now_s, arrivals[-1]) if n else 0.0

    # ------------------------------------------------------------------ steps
    def step(self, next_arrival_s: float) -> bool:
        """The policy's next step (several decode steps at once where nothing can change in between);
        False when nothing could run (nobody is running then)."""
        transfer_s = self.swap_in() if self.swapped else 0.0
        admitted = self.admit() if self.waiting else None
        if admitted:
            self.prefill_step(admitted, transfer_s)
            return True
        return bool(self.running) and self.decode_steps(transfer_s, next_arrival_s)

    def decode_steps(self, transfer_s: float, next_arrival_s: float) -> bool:
        """Decode steps, each running sequence one token per step (the first after preempting the newest
        while blocks are too few), until the next interaction: a finish, an arrival by the clock, or a
        step short of blocks (the queue cannot change in between: no seat, reservation or block comes
        free without a finish; after a preemption, one step only: the blocks it freed may let the queue
        move). False when preemption emptied the batch."""
        running, size, residues = self.running, self.block_size, self.residues
        d = self.d
        need = residues[-d % size]  # sequences whose next token opens a block
        if need > self.n_free or self.pending:  # held-back arrivals are handed over between steps
            next_arrival_s = -math.inf
        while need > self.n_free:
            transfer_s += self.preempt(running[-1])
            if not running:
                return False
            need = residues[-d % size]
        if transfer_s and self.attributing:  # every sequence of the step waits for the transfer
            self.decode_transfer_s += transfer_s
        price, heap, n_blocks = self.decode_price, self.finish_heap, self.n_blocks
        record = self.record
        gaps, counts, steps = record.gaps_s, record.gap_counts, record.steps if self.record_steps else None
        prefilling = self.prefilling  # running, outside the sums (chunked prefill's partial prefills): idle here
        n_free, now_s, cohorts, n = self.n_free, self.now_s, self.cohorts, len(running) - len(prefilling)
        idle_tokens = sum(self.n_computed[rid] for rid in prefilling)
        idle_blocks = sum(self.blocks_for(self.n_computed[rid]) for rid in prefilling)  # not read by the step
        busy_s, util_time, waste_time, n_steps = self.busy_s, self.kv_util_time, self.kv_waste_time, self.n_steps
        offset_sum = self.offset_sum  # no one joins or leaves until this returns
        energy, per_sequence_j = self.energy, self.per_sequence_j
        while True:
            n_free -= need
            context = offset_sum + n * d
            used = n_blocks - n_free
            if price is not None:
                step_s = price(n, context, used - idle_blocks)
            else:
                contexts = np.array([self.offset[rid] + d for rid in running if rid not in prefilling], dtype=np.int64)
                step_s = float(self.cost.step_time_s(np.ones(n, dtype=np.int64), contexts, n))
            if energy is not None:
                per_sequence_j += energy.decode(n, context, step_s, transfer_s)
            start_s = now_s
            duration_s = step_s + transfer_s
            now_s = end_s = start_s + duration_s
            d += 1
            for last_s, count in cohorts.items():
                gaps.append(end_s - last_s)
                counts.append(count)
            cohorts = {end_s: n}
            # the recorder's sums (StepRecord.step): KV after the step's tokens, before finishes free theirs
            n_steps += 1
            busy_s += duration_s
            util_time += duration_s * used / n_blocks
            if used > 0:
                slots = used * size
                waste_time += duration_s * max(slots - float(context + n + idle_tokens), 0.0) / slots
            if steps is not None:
                steps.append((start_s, duration_s, n, 0, n, used))
            need = residues[-d % size]
            if heap[0][0] <= d or now_s >= next_arrival_s or need > n_free:
                break
            transfer_s = 0.0
        self.d, self.n_free, self.now_s, self.cohorts, self.last_decode_end_s = d, n_free, now_s, cohorts, end_s
        self.per_sequence_j = per_sequence_j
        self.step_start_s, self.step_end_s, self.step_compute_start_s = start_s, end_s, end_s - step_s
        self.busy_s, self.kv_util_time, self.kv_waste_time, self.n_steps = busy_s, util_time, waste_time, n_steps
        generation = self.generation
        while heap and heap[0][0] <= d:
            _, entry_generation, rid = heapq.heappop(heap)
            if entry_generation == generation[rid]:
                self.finish(rid, end_s)
        return True

    def prefill_step(self, admitted: list[tuple[int, int]], transfer_s: float) -> None:
        """The admitted requests prefill whole, and nothing else runs."""
        ids = [rid for rid, _ in admitted]
        new_tokens = [n_new for _, n_new in admitted]
        cached = [self.n_computed[rid] for rid in ids]
        n_sampled = sum(1 for rid, n_new, c in zip(ids, new_tokens, cached) if c + n_new == self.n_tokens[rid])
        step_s = self.cost.step_time_s(np.array(new_tokens, dtype=np.int64), np.array(cached, dtype=np.int64),
                                       n_sampled)
        if self.energy is not None:
            self.energy.step(ids, new_tokens, cached, n_sampled, float(step_s), transfer_s)
        start_s = self.now_s
        duration_s = float(step_s) + transfer_s
        self.now_s = end_s = start_s + duration_s
        self.step_start_s, self.step_end_s, self.step_compute_start_s = start_s, end_s, end_s - float(step_s)
        if self.attributing:
            self.attribute_prefill(ids, new_tokens, start_s, end_s, transfer_s, float(step_s))
        gaps, counts = self.record.gaps_s, self.record.gap_counts
        done = []
        for rid, n_new, c in zip(ids, new_tokens, cached):
            computed = c + n_new
            self.n_tokens[rid] += 1  # every token cached (a whole prefill): the step samples the next one
            if math.isnan(self.first_s[rid]):
                self.first_s[rid] = end_s
            else:
                gaps.append(end_s - self.last_s[rid])
                counts.append(1)
            self.join_sums(rid, computed, end_s)
            if self.n_tokens[rid] >= self.final[rid]:
                done.append(rid)
        running_tokens = self.offset_sum + len(self.running) * self.d
        prefill_tokens = sum(q for q in new_tokens if q > 1)  # a one-token prompt counts as a decode token
        self.account(start_s, duration_s, self.n_blocks - self.n_free, running_tokens, len(ids), prefill_tokens,
                     len(ids) - sum(1 for q in new_tokens if q > 1))
        for rid in done:
            self.finish(rid, end_s)

    def account(self, start_s: float, duration_s: float, used: int, running_tokens: int, batch: int,
                prefill_tokens: int, decode_tokens: int) -> None:
        """The recorder's sums for one step (StepRecord.step, without its per-sequence lists)."""
        self.n_steps += 1
        self.busy_s += duration_s
        self.kv_util_time += duration_s * used / self.n_blocks
        if used > 0:
            slots = used * self.block_size
            self.kv_waste_time += duration_s * max(slots - float(running_tokens), 0.0) / slots
        if self.record_steps:
            self.record.steps.append((start_s, duration_s, batch, prefill_tokens, decode_tokens, used))

    def write_back(self) -> None:
        """The per-request lists into the table, the sums into the record."""
        t, n = self.table, self.table.n_requests
        t.status[:n] = self.status
        t.n_computed[:n] = self.n_computed
        t.n_tokens[:n] = self.n_tokens
        for column, values in ((t.first_token_s, self.first_s), (t.last_token_s, self.last_s),
                               (t.finish_s, self.finish_s), (t.scheduled_s, self.scheduled_s),
                               (t.preempted_s, self.preempted_s), (t.preemptions, self.preemptions)):
            column[:n] = values
        if self.energy is not None:
            self.energy.finish()
        r = self.record
        r.n_steps, r.busy_s, r.kv_util_time, r.kv_waste_time = self.n_steps, self.busy_s, self.kv_util_time, \
            self.kv_waste_time
