"""Chunked prefill (vLLM V1 semantics) on one replica as the fused core runs it.

The rules are the reference stepper's (sim/engine/reference/chunked.py, which says them step by
step); the state is the continuous core's (sim/engine/fused/continuous.py): decoding sequences are
kept as running sums, and the partial prefills (running, not yet decoding) in a list of their own.
A sequence joins the sums as soon as it decodes (one token left to compute, its prompt cached) and
leaves them when it finishes or is preempted.

- With no partial prefill and nobody waiting, the continuous core's decode steps run (several in one
  call until a finish, an arrival or a step short of blocks).
- Otherwise the decoding sequences' next blocks are taken first (the newest running sequence
  preempted while short), the token budget goes to partial prefills and then to admissions; a step
  of the decoding sequences alone (no chunk could be placed) is again the continuous core's decode
  steps, and a step with chunks is priced through `cost.step_time_s` with every row, one at a time.
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from sim.engine.fused.admission import SWAPPED, WAITING
from sim.engine.fused.continuous import FusedContinuous


class FusedChunked(FusedContinuous):
    """One replica replaying `table` (rows in arrival order) under the chunked-prefill policy."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)  # its `prefilling`: running partial prefills, in the order they joined
        self.cap = self.cfg.chunk_size or math.inf
        self.preemptions_before = 0  # the record's preemptions when the step being formed began

    def step(self, next_arrival_s: float) -> bool:
        self.preemptions_before = self.record.preemptions
        ran = self.form_step(True, 0.0, next_arrival_s)
        preempted_s = 0.0
        while not ran and self.running:  # every running request a partial prefill short of blocks
            preempted_s += self.preempt(self.running[-1])
            ran = self.form_step(not self.running, preempted_s, next_arrival_s)
        return ran

    def decode_steps_from_here(self, transfer_s: float, next_arrival_s: float) -> bool:
        """The continuous core's decode steps; one only after a preemption while forming this step (the
        blocks it freed may let a swapped-out request back, or a chunk in, at the next)."""
        if self.record.preemptions != self.preemptions_before:
            next_arrival_s = -math.inf
        return self.decode_steps(transfer_s, next_arrival_s)

    def decoding(self, rid: int) -> bool:
        """Whether a request outside the sums now decodes (one token left, its prompt cached)."""
        computed = self.n_computed[rid]
        return self.n_tokens[rid] - computed == 1 and computed >= self.prompt[rid]

    def form_step(self, admit: bool, transfer_s: float, next_arrival_s: float) -> bool:
        """Run the step formed now (`admit` False: no swap-in, no admission; `transfer_s`: swap traffic of
        preemptions made for it); False when none could be formed."""
        if admit and self.swapped:
            transfer_s += self.swap_in()
        if not self.prefilling and not self.waiting:
            return bool(self.running) and self.decode_steps_from_here(transfer_s, next_arrival_s)
        size = self.block_size
        while self.residues[-self.d % size] > self.n_free:  # the decoding sequences' next blocks first
            transfer_s += self.preempt(self.running[-1])
        need = self.residues[-self.d % size]
        self.n_free -= need
        n_decoding = len(self.running) - len(self.prefilling)
        chunks = self.prefill_chunks(self.cfg.max_num_batched_tokens - n_decoding, admit)
        if not chunks:
            self.n_free += need  # the decode steps take them
            return n_decoding > 0 and self.decode_steps_from_here(transfer_s, next_arrival_s)
        self.mixed_step(chunks, transfer_s)
        return True

    def prefill_chunks(self, budget: int, admit: bool) -> list[tuple[int, int]]:
        """(request, tokens) of the step's chunks: partial prefills in the order they joined, then (`admit`)
        waiting requests first come, first served; their blocks are taken."""
        chunks: list[tuple[int, int]] = []
        for rid in self.prefilling:
            if budget <= 0:
                break
            computed = self.n_computed[rid]
            n_new = int(min(self.n_tokens[rid] - computed, budget, self.cap))
            more = self.blocks_for(computed + n_new) - self.blocks_for(computed)
            if more > self.n_free:
                continue
            self.n_free -= more
            chunks.append((rid, n_new))
            budget -= n_new
        waiting = self.waiting
        while admit and budget > 0 and waiting and not self.swapped and len(self.running) < self.cfg.max_num_seqs:
            rid = waiting[0]
            if self.reserve_full and not self.reserve(rid):
                break
            n_new = int(min(self.n_tokens[rid] - self.n_computed[rid], budget, self.cap))
            need = self.blocks_for(self.n_computed[rid] + n_new)  # a waiting request holds no blocks
            if n_new <= 0 or need > self.n_free - self.watermark_blocks:
                self.reserved_blocks -= self.reserved.pop(rid, 0)
                break
            self.n_free -= need
            waiting.popleft()
            self.start_running(rid)
            self.prefilling.append(rid)
            chunks.append((rid, n_new))
            budget -= n_new
        return chunks

    def mixed_step(self, chunks: list[tuple[int, int]], transfer_s: float) -> None:
        """One step: every sequence of the sums decodes a token and each chunk's request computes its chunk."""
        d, offset = self.d, self.offset
        partial = set(self.prefilling)
        decoding = [rid for rid in self.running if rid not in partial]
        ids = decoding + [rid for rid, _ in chunks]
        new_tokens = [1] * len(decoding) + [n_new for _, n_new in chunks]
        cached = [offset[rid] + d for rid in decoding] + [self.n_computed[rid] for rid, _ in chunks]
        n_tokens = self.n_tokens
        n_sampled = len(decoding) + sum(1 for rid, n_new, c in zip(ids[len(decoding):], new_tokens[len(decoding):],
                                                               cached[len(decoding):]) if c + n_new == n_tokens[rid])
        step_s = float(self.cost.step_time_s(np.array(new_tokens, dtype=np.int64), np.array(cached, dtype=np.int64),
                                             n_sampled))
        if self.energy is not None:
            self.energy.step(ids, new_tokens, cached, n_sampled, step_s, transfer_s)
        start_s = self.now_s
        duration_s = step_s + transfer_s
        self.now_s = end_s = start_s + duration_s
        self.step_start_s, self.step_end_s, self.step_compute_start_s = start_s, end_s, end_s - step_s
        if self.attributing:
            batch_contexts = cached[: len(decoding)]
            self.attribute_mixed(ids[len(decoding):], new_tokens[len(decoding):], cached[len(decoding):], start_s,
                                 end_s, transfer_s, step_s, lambda more: self.decode_only_s(batch_contexts + more))
        self.commit_mixed(decoding, chunks, end_s)
        running_tokens = self.offset_sum + (len(self.running) - len(self.prefilling)) * self.d + \
            sum(self.n_computed[rid] for rid in self.prefilling)
        prefill_tokens = sum(q for q in new_tokens if q > 1)  # a one-token chunk counts as a decode token
        self.account(start_s, duration_s, self.n_blocks - self.n_free, running_tokens, len(ids), prefill_tokens,
                     len(ids) - sum(1 for q in new_tokens if q > 1))
        heap, generation = self.finish_heap, self.generation
        while heap and heap[0][0] <= self.d:
            _, entry_generation, rid = heapq.heappop(heap)
            if entry_generation == generation[rid]:
                self.finish(rid, end_s)

    def commit_mixed(self, decoding: list[int], chunks: list[tuple[int, int]], end_s: float) -> None:
        """The step's tokens into the cache: the sums advance one decode step (one gap per cohort); each
        chunk's request counts its tokens, samples when all are cached, and joins the sums once decoding."""
        gaps, counts = self.record.gaps_s, self.record.gap_counts
        if decoding:
            self.d += 1
            for last_s, count in self.cohorts.items():
                gaps.append(end_s - last_s)
                counts.append(count)
            self.cohorts = {end_s: len(decoding)}
            self.last_decode_end_s = end_s
        for rid, n_new in chunks:
            computed = self.n_computed[rid] + n_new
            self.n_computed[rid] = computed
            if computed == self.n_tokens[rid]:  # every token cached: the step samples the next one
                self.n_tokens[rid] += 1
                if math.isnan(self.first_s[rid]):
                    self.first_s[rid] = end_s
                else:
                    gaps.append(end_s - self.last_s[rid])
                    counts.append(1)
                self.last_s[rid] = end_s
            if self.decoding(rid):
                self.prefilling.remove(rid)
                self.join_sums(rid, computed, self.last_s[rid])

    def decode_only_s(self, contexts: list[int]) -> float:
        """The time of a step decoding sequences with these contexts and nothing else (attribution)."""
        n = len(contexts)
        return float(self.cost.step_time_s(np.ones(n, dtype=np.int64), np.array(contexts, dtype=np.int64), n))

    def swap_in(self) -> float:
        """Bring swapped-out requests back, oldest first, while their blocks fit; the transfer seconds. One
        that was decoding joins the sums, a partial prefill the partial prefills."""
        moved = 0
        while self.swapped and self.held_cpu[self.swapped[0]] <= self.n_free:
            rid = self.swapped.popleft()
            n = self.held_cpu.pop(rid)
            self.n_cpu_free += n
            self.n_free -= n
            moved += n
            self.start_running(rid)
            if self.decoding(rid):
                self.join_sums(rid, self.n_computed[rid], self.last_s[rid])
            else:
                self.prefilling.append(rid)
        return moved * self.swap_s_per_block

    def preempt(self, rid: int) -> float:
        """`FusedContinuous.preempt`, for a partial prefill too (it is not in the sums)."""
        if rid not in self.prefilling:
            return super().preempt(rid)
        self.prefilling.remove(rid)
        self.running.remove(rid)
        self.preemptions[rid] += 1
        self.record.preemptions += 1
        self.preempted_at_s[rid] = self.now_s
        self.reserved_blocks -= self.reserved.pop(rid, 0)
        n_held = self.blocks_for(self.n_computed[rid])
        self.n_free += n_held
        if self.swap_mode and self.n_cpu_free >= n_held:
            self.n_cpu_free -= n_held
            self.held_cpu[rid] = n_held
            self.status[rid] = SWAPPED
            self.swapped.append(rid)
            return n_held * self.swap_s_per_block
        self.n_computed[rid] = 0
        self.status[rid] = WAITING
        self.waiting.appendleft(rid)
        return 0.0
