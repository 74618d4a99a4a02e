"""Continuous batching (vLLM v0 style, prefills first) on one replica, one step at a time.

Each step, in order:
1. requests that arrived by now join the waiting queue (or are rejected at their arrival when
   they can never fit: prompt at or beyond max_model_len, or more blocks than the cache offers);
2. swapped-out requests come back, oldest first, while their blocks fit;
3. waiting requests are admitted first come, first served, while a seat (`max_num_seqs`), the
   token budget (`max_num_batched_tokens`; a lone prompt larger than it runs alone) and free
   blocks (keeping the watermark free) allow; a preempted request recomputes everything it had;
4. if any were admitted, the step prefills them whole and nothing else; otherwise every running
   request decodes one token, after the newest running requests are preempted (swapped out, or
   dropped to recompute) while blocks are too few for the tokens the step adds;
5. the step takes `cost.step_time_s` plus any swap traffic; then every sequence whose tokens are
   all cached samples one (its first token, or one more inter-token gap), and those that reached
   their last token finish and give their blocks back.
With nothing to run, nothing running and work left, the head of the queue can never start and is
rejected; with no work at all the replica idles until the next arrival.

Asynchronous scheduling (vLLM V1's async scheduler, SGLang's overlap scheduler): step n+1 is formed
when step n starts, so a request arriving while step n runs is held back and joins step n+2 (the
queue after step n+1); one that arrives at an idle replica, or when nothing else can run, joins at once.

KV blocks: a request's table covers exactly its cached tokens plus the tokens of the step it is in
(`ceil(tokens / block_size)` blocks); this module counts blocks, it does not name them.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from sim.engine.reference.energy import reference_energy
from sim.engine.reference.record import StepRecord
from sim.engine.request import RequestTable, Status
from sim.inputs.config import EngineConfig


class ContinuousStepper:
    """One replica replaying `table` (its rows in arrival order) under the continuous policy."""

    def __init__(self, cfg: EngineConfig, table: RequestTable, cost, n_blocks: int, n_cpu_blocks: int,
                 swap_s_per_block: float, max_model_len: int, async_scheduling: bool = False,
                 attribution=None):
        self.cfg, self.table, self.cost, self.max_model_len = cfg, table, cost, max_model_len
        self.block_size = cfg.block_size
        self.n_blocks, self.watermark_blocks = n_blocks, int(cfg.watermark * n_blocks)
        self.n_free, self.n_cpu_free = n_blocks, n_cpu_blocks
        self.swap_s_per_block = swap_s_per_block
        self.held: dict[int, int] = {}  # GPU blocks each request's table holds
        self.held_cpu: dict[int, int] = {}  # CPU blocks each swapped-out request holds
        self.reserved: dict[int, int] = {}  # kv_admission reserve_full: blocks each admitted request will end with
        self.waiting: deque[int] = deque()
        self.running: list[int] = []
        self.swapped: deque[int] = deque()
        self.preempted_at_s: dict[int, float] = {}
        self.now_s = 0.0
        self.async_scheduling = async_scheduling
        self.pending: list[tuple[int, float]] = []  # (request, arrival) held back a step (async scheduling)
        self.step_start_s = self.step_end_s = -math.inf  # the last step's
        self.step_compute_start_s = -math.inf  # when its computing began, after its swap traffic
        self.record = StepRecord(n_blocks, cfg.block_size)
        self.energy = reference_energy(cost, table)  # None where the engine meters none
        self.record.energy = None if self.energy is None else self.energy.tally
        # latency attribution: `step(...)` books each step (sim.run.attribution_steps.StepAttribution), or None
        self.record.attribution = attribution

    def blocks_for(self, n_tokens: int) -> int:
        return -(-n_tokens // self.block_size)

    # ------------------------------------------------------------------ the loop
    def run(self) -> float:
        """Replay every request; returns when the last event happened (a step's end or an arrival)."""
        t, n = self.table, self.table.n_requests
        next_row = 0
        while True:
            while next_row < n and t.arrival_s[next_row] <= self.now_s:
                arrival_s = float(t.arrival_s[next_row])
                if self.async_scheduling and self.step_start_s < arrival_s <= self.step_end_s:
                    self.pending.append((next_row, arrival_s))  # it arrived while the last step ran
                else:
                    self.arrive(next_row, arrival_s)
                next_row += 1
            self.hand_over(everyone=False)
            if not (self.waiting or self.running or self.swapped):
                if self.pending:
                    self.hand_over(everyone=True)
                    continue
                if next_row == n:
                    return max(self.now_s, float(t.arrival_s[n - 1])) if n else 0.0
                self.now_s = max(self.now_s, float(t.arrival_s[next_row]))  # idle until it arrives
                continue
            if self.step():
                continue
            if self.pending:  # nothing else can run: the held-back arrivals join now
                self.hand_over(everyone=True)
            elif not self.running:
                self.reject_head()

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

    def step(self) -> bool:
        """Plan, run and commit one step; False when there was nothing to run."""
        transfer_s = self.swap_in()
        admitted = self.admit()
        if admitted:
            ids = [rid for rid, _ in admitted]
            new_tokens = [n_new for _, n_new in admitted]
        else:
            transfer_s += self.make_room_for_decodes()
            ids = list(self.running)
            new_tokens = [1] * len(ids)
            for rid in ids:  # each decoding request's table grows to cover its next token
                self.take_blocks(rid, int(self.table.n_computed[rid]) + 1)
        if not ids:
            return False
        self.run_step(ids, new_tokens, transfer_s)
        return True

    def run_step(self, ids: list[int], new_tokens: list[int], transfer_s: float) -> None:
        t = self.table
        cached = [int(t.n_computed[rid]) for rid in ids]
        n_sampled = sum(1 for rid, n_new, c in zip(ids, new_tokens, cached) if c + n_new == t.n_tokens[rid])
        step_s = self.cost.step_time_s(np.array(new_tokens, dtype=np.int64), np.array(cached, dtype=np.int64),
                                       n_sampled)
        if self.energy is not None:
            self.energy.step(ids, new_tokens, cached, n_sampled, float(step_s), transfer_s)
        start_s = self.now_s
        duration_s = float(step_s) + transfer_s
        self.now_s = end_s = start_s + duration_s
        self.step_start_s, self.step_end_s = start_s, end_s
        self.step_compute_start_s = start_s + duration_s - float(step_s)
        if self.record.attribution is not None:
            self.record.attribution.step(ids, new_tokens, cached, start_s, end_s, transfer_s, float(step_s))
        sampled = []
        for rid, n_new in zip(ids, new_tokens):
            t.n_computed[rid] += n_new
            if t.n_computed[rid] < t.n_tokens[rid]:
                continue
            t.n_tokens[rid] += 1  # every token cached: the step samples the next one
            if math.isnan(t.first_token_s[rid]):
                t.first_token_s[rid] = end_s
            else:
                self.record.gaps_s.append(end_s - float(t.last_token_s[rid]))
            t.last_token_s[rid] = end_s
            sampled.append(rid)
        running_tokens = sum(int(t.n_computed[rid]) for rid in self.running)
        self.record.step(start_s, duration_s, new_tokens, self.n_blocks - self.n_free, running_tokens)
        for rid in sampled:
            if t.n_tokens[rid] >= t.final_tokens[rid]:
                self.finish(rid, end_s)

    # ------------------------------------------------------------------ arrivals and rejections
    def arrive(self, rid: int, now_s: float) -> None:
        """`rid` reaches the scheduler at `now_s` (its arrival, unless held back): it waits, or is rejected
        then if it can never fit."""
        t = self.table
        t.replica[rid] = 0
        prompt = int(t.prompt_tokens[rid])
        need = self.blocks_for(prompt + int(t.output_tokens[rid]))
        if prompt >= self.max_model_len:
            t.reject(rid, f"prompt of {prompt} tokens leaves no room under max_model_len={self.max_model_len}",
                     now_s)
        elif need > self.n_blocks - self.watermark_blocks:
            t.reject(rid, f"prompt+output need {need} KV blocks; the cache holds {self.n_blocks}", now_s)
        else:
            t.status[rid] = Status.WAITING
            self.waiting.append(rid)

    def reject_head(self) -> None:
        """Nothing runs and nothing could start: the head of the queue (else the oldest swapped-out
        request) never will."""
        if self.waiting:
            self.table.reject(self.waiting.popleft(), "could not be scheduled with the configured limits",
                              self.now_s)
            return
        rid = self.swapped.popleft()
        self.n_cpu_free += self.held_cpu.pop(rid)
        self.preempted_at_s.pop(rid, None)
        self.table.reject(rid, "swapped out and could not come back: its blocks no longer fit with the "
                               "configured limits", self.now_s)

    # ------------------------------------------------------------------ admission
    def admit(self) -> list[tuple[int, int]]:
        """(request, tokens to prefill) of the waiting requests admitted now, first come first served."""
        t = self.table
        admitted: list[tuple[int, int]] = []
        budget_used = 0
        while self.waiting and not self.swapped and len(self.running) < self.cfg.max_num_seqs:
            rid = self.waiting[0]
            wanted = int(t.n_tokens[rid] - t.n_computed[rid])
            if admitted and budget_used + wanted > self.cfg.max_num_batched_tokens:
                break
            if self.cfg.kv_admission == "reserve_full" and not self.reserve(rid):
                break
            need = self.blocks_for(int(t.n_computed[rid]) + wanted) - self.held.get(rid, 0)
            if need > self.n_free - self.watermark_blocks:  # a new request leaves the watermark free
                self.reserved.pop(rid, None)
                break
            self.take_blocks(rid, int(t.n_computed[rid]) + wanted)
            self.waiting.popleft()
            self.start_running(rid)
            admitted.append((rid, wanted))
            budget_used += wanted
        return admitted

    def reserve(self, rid: int) -> bool:
        """reserve_full: `rid` starts only if the blocks it will hold at its end fit beside every admitted
        request's (the watermark kept free)."""
        if rid in self.reserved:
            return True
        final = self.blocks_for(int(self.table.final_tokens[rid]))
        if sum(self.reserved.values()) + final > self.n_blocks - self.watermark_blocks:
            return False
        self.reserved[rid] = final
        return True

    def start_running(self, rid: int) -> None:
        t = self.table
        t.status[rid] = Status.RUNNING
        if math.isnan(t.scheduled_s[rid]):
            t.scheduled_s[rid] = self.now_s
        if rid in self.preempted_at_s:
            t.preempted_s[rid] += self.now_s - self.preempted_at_s.pop(rid)
        self.running.append(rid)

    def swap_in(self) -> float:
        """Bring swapped-out requests back, oldest first, while their blocks fit; the transfer seconds."""
        moved = 0
        while self.swapped and self.held_cpu[self.swapped[0]] <= self.n_free:
            rid = self.swapped.popleft()
            n = self.held_cpu.pop(rid)
            self.n_cpu_free += n
            self.n_free -= n
            self.held[rid] = n
            moved += n
            self.start_running(rid)
        return moved * self.swap_s_per_block

    # ------------------------------------------------------------------ blocks, preemption, finishing
    def take_blocks(self, rid: int, n_tokens: int) -> None:
        """Grow `rid`'s table to cover `n_tokens` tokens (the caller checked the blocks are free)."""
        more = self.blocks_for(n_tokens) - self.held.get(rid, 0)
        if more > 0:
            self.n_free -= more
            self.held[rid] = self.held.get(rid, 0) + more

    def make_room_for_decodes(self) -> float:
        """Preempt the newest running requests until every running request's next token has a slot;
        returns the swap transfer seconds."""
        t = self.table
        transfer_s = 0.0
        while self.running:
            need = sum(1 for rid in self.running if t.n_computed[rid] % self.block_size == 0)
            if need <= self.n_free:
                break
            transfer_s += self.preempt(self.running[-1])
        return transfer_s

    def preempt(self, rid: int) -> float:
        """Swap `rid` out to host memory (when its blocks fit there and the mode is swap) or drop its KV
        to recompute it later, first in the queue. Returns the swap transfer seconds."""
        t = self.table
        self.running.remove(rid)
        t.preemptions[rid] += 1
        self.record.preemptions += 1
        self.preempted_at_s[rid] = self.now_s
        self.reserved.pop(rid, None)
        n_held = self.held.pop(rid, 0)
        self.n_free += n_held
        if self.cfg.preemption_mode == "swap" and self.n_cpu_free >= n_held:
            self.n_cpu_free -= n_held
            self.held_cpu[rid] = n_held
            t.status[rid] = Status.SWAPPED
            self.swapped.append(rid)
            return n_held * self.swap_s_per_block
        t.n_computed[rid] = 0
        t.status[rid] = Status.WAITING
        self.waiting.appendleft(rid)
        return 0.0

    def finish(self, rid: int, end_s: float) -> None:
        t = self.table
        self.running.remove(rid)
        self.reserved.pop(rid, None)
        self.n_free += self.held.pop(rid, 0)
        t.status[rid] = Status.FINISHED
        t.finish_s[rid] = end_s
