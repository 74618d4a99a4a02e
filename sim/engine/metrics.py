"""Recording during a run (cheap appends into growable numpy buffers), tables after it.

Inter-token gaps are kept as weighted samples: a decode run of k steps over n sequences adds
n gaps for its first step and k-1 values of weight n, so memory grows with steps, not tokens.
Past `GAP_COMPACT_AT` samples, equal values are merged (their weights added): percentiles and
the maximum do not change; the mean may differ in its last bits (another summation order).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from sim.engine.energy import merged_energy
from sim.engine.growable import Growable
from sim.engine.request_gaps import RequestGaps
from sim.engine.scheduler_view import Scheduler
from sim.engine.step_counts import countdown, step_numbers

if TYPE_CHECKING:  # (sim.engine.sched's package face imports the scheduler, which imports this module)
    import pandas as pd

    from sim.engine.sched.plan import StepPlan


GAP_COMPACT_AT = 4_000_000  # weighted gap samples kept before equal values are merged
MIN_REPLICA_GAP_COMPACT_AT = 16_384  # a cluster's replicas compact at their share of it, but not below this
RUNNING_SUM_LOOP_MAX = 32  # a step's running tokens are summed in plain Python up to this many requests


def replica_gap_compact_at(n_replicas: int) -> int:
    """Gap samples each of n replicas (one recorder each) keeps before compacting: together about
    what one recorder keeps."""
    return max(GAP_COMPACT_AT // n_replicas, min(GAP_COMPACT_AT, MIN_REPLICA_GAP_COMPACT_AT))


STEP_COLUMNS = ("replica", "start_s", "step_time_s", "batch_size", "prefill_tokens", "decode_tokens",
                "kv_blocks_used")


class Recorder:
    """Everything measured while the simulation runs (never plots or writes)."""

    def __init__(self, record_steps: bool, gap_compact_at: int | None = None):
        self.record_steps = record_steps
        self.attribution = None  # a sim.run.attribution.Attribution when latency attribution is on
        self.energy, self.energy_missing = None, None  # sim.engine.energy.EnergyTally, or why none (said once)
        self.request_gaps: RequestGaps | None = None  # each request's own gaps, when asked for (--save-detailed)
        self.gap_values = Growable()
        self.gap_weights = Growable(np.int64)
        self._gap_compact_at = GAP_COMPACT_AT if gap_compact_at is None else gap_compact_at
        self._compact_at = self._gap_compact_at
        self.preemptions = 0
        self.n_steps = 0
        self.busy_s = 0.0
        self._kv_util_time = 0.0  # integral of used/total blocks over busy time
        self._kv_waste_time = 0.0  # integral of (slots held by requests - tokens in them) / those slots
        self._steps = {name: Growable(np.float64) for name in STEP_COLUMNS}

    def sibling(self) -> Recorder:
        """A fresh recorder for another replica of the same run (same settings, same attribution)."""
        other = Recorder(self.record_steps, self._gap_compact_at)
        other.attribution = self.attribution
        other.request_gaps = None if self.request_gaps is None else RequestGaps()
        return other

    @classmethod
    def merged(cls, parts: list[Recorder]) -> Recorder:
        """One recorder for a cluster whose replicas each kept their own (`sibling`): samples side by
        side in replica order (compacted past GAP_COMPACT_AT), totals added in that order, steps
        ordered by start time (stable, so replica order breaks ties); each part's gaps compacted
        first (`compact_as_part`). The same parts give the same bits, whatever ran them where."""
        if len(parts) == 1:
            return parts[0]
        for part in parts:
            part.compact_as_part()
        out = Recorder(parts[0].record_steps)
        out.attribution = parts[0].attribution
        out.energy, out.energy_missing = merged_energy(parts)
        if parts[0].request_gaps is not None:
            out.request_gaps = RequestGaps.merged([part.request_gaps for part in parts])
        out.gap_values = Growable.holding(np.concatenate([part.gap_values.array() for part in parts]))
        out.gap_weights = Growable.holding(np.concatenate([part.gap_weights.array() for part in parts]))
        for part in parts:
            out.preemptions += part.preemptions
            out.n_steps += part.n_steps
            out.busy_s += part.busy_s
            out._kv_util_time += part._kv_util_time
            out._kv_waste_time += part._kv_waste_time
        if out.gap_values.size >= out._compact_at:
            out.compact_gaps()
        if out.record_steps:
            columns = {name: np.concatenate([part._steps[name].array() for part in parts]) for name in STEP_COLUMNS}
            order = np.argsort(columns["start_s"], kind="stable")
            for name, values in columns.items():
                out._steps[name].extend(values[order])
        return out

    def add_unit_gaps(self, values, rows) -> None:
        """Inter-token gaps (a list or array) of weight 1 each: a single step's, of the requests in
        table `rows` (kept per request only when `request_gaps` is on)."""
        self.gap_values.claim(len(values))[:] = values
        self.gap_weights.claim(len(values))[:] = 1
        if self.request_gaps is not None:
            self.request_gaps.add(rows, values)

    def add_run_gaps(self, first_gaps: np.ndarray, later_steps_s: np.ndarray, rows: np.ndarray,
                     later_weights: np.ndarray | None = None, seq_steps: np.ndarray | None = None) -> None:
        """A decode run's gaps: each sequence's own first gap, then every later step once per sequence
        (`later_weights`: per step, how many sequences it computes, when some left the run; `seq_steps`:
        per sequence, how many steps it computed); `rows`: the sequences' table rows."""
        if self.request_gaps is not None:
            self.request_gaps.add_run(rows, first_gaps, later_steps_s, seq_steps)
        n, n_later = first_gaps.shape[0], later_steps_s.shape[0]
        values, weights = self.gap_values.claim(n + n_later), self.gap_weights.claim(n + n_later)
        values[:n] = first_gaps
        values[n:] = later_steps_s
        weights[:n] = 1
        weights[n:] = n if later_weights is None else later_weights
        if self.gap_values.size >= self._compact_at:
            self.compact_gaps()

    def compact_as_part(self) -> None:
        """One replica's recorder about to be merged into its cluster's (`merged`; a worker process
        calls it before sending it): its gaps compacted, unless it holds only a few (the same
        result wherever it runs: compacting twice changes nothing)."""
        if self.gap_values.size > MIN_REPLICA_GAP_COMPACT_AT:
            self.compact_gaps()

    def compact_gaps(self) -> None:
        """Merge equal gap values (weights added), so memory follows distinct values, not samples."""
        values, inverse = np.unique(self.gap_values.array(), return_inverse=True)
        weights = np.bincount(inverse, weights=self.gap_weights.array()).astype(np.int64)
        capacity = len(values) + 1024
        self.gap_values, self.gap_weights = Growable(capacity=capacity), Growable(np.int64, capacity)
        self.gap_values.extend(values)
        self.gap_weights.extend(weights)
        self._compact_at = max(self._gap_compact_at, 2 * len(values))

    def _kv_sample(self, duration_s: float, used: int, request_blocks: int, tokens: float, block_size: int,
                   n_blocks: int) -> None:
        """One step's KV utilisation and fragmentation (`run` records a decode run's steps)."""
        self.busy_s += duration_s
        self._kv_util_time += duration_s * used / n_blocks
        if request_blocks > 0:
            slots = request_blocks * block_size
            self._kv_waste_time += duration_s * max(slots - tokens, 0.0) / slots

    def _waste_where_held(self, durations_s: np.ndarray, request_blocks: np.ndarray, tokens: np.ndarray,
                          block_size: int) -> None:
        """Fragmentation over steps of the given durations, counting only steps in which requests
        hold blocks."""
        slots = request_blocks * block_size
        held = slots > 0
        if held.any():
            waste = np.maximum(slots[held] - tokens[held], 0.0) / slots[held]
            self._kv_waste_time += float((durations_s[held] * waste).sum())

    def _running_tokens(self, sched: Scheduler) -> float:
        """Tokens the running requests have computed (a sum of integers: exact either way)."""
        running = sched.running
        if len(running) <= RUNNING_SUM_LOOP_MAX:  # a few: one pass over Python ints beats a gather
            return float(sum(map(sched.table.n_computed.item, running)))
        return float(np.add.reduce(sched.table.n_computed[running]))

    def step(self, sched: Scheduler, end_s: float, plan: StepPlan, prefill_tokens: int,
             decode_tokens: int) -> None:
        blocks = sched.blocks
        used = blocks.n_used
        self._kv_sample(plan.duration_s, used, sched.n_request_blocks(), self._running_tokens(sched),
                        blocks.block_size, blocks.n_blocks)
        self.n_steps += 1
        if self.record_steps:
            row = (sched.replica, end_s - plan.duration_s, plan.duration_s, plan.req_ids.shape[0],
                   prefill_tokens, decode_tokens, used)
            for name, value in zip(STEP_COLUMNS, row):
                self._steps[name].extend(value)

    def run(self, sched: Scheduler, start_s: float, plan: StepPlan) -> None:
        """A committed decode run, recorded exactly as its k single steps would have been (up to the
        order of float sums): per step, blocks used = now - blocks the run takes after that step."""
        blocks, k = sched.blocks, plan.n_steps
        if k == 1 and not self.record_steps:
            self._one_step_run(sched, plan)
            return
        block_tokens = sched.run_block_tokens(plan)
        later_growth = (block_tokens[-1] - block_tokens) / blocks.block_size  # blocks taken after each step
        n_growing = plan.req_ids.shape[0] + plan.padded_ids.shape[0]
        durations = plan.step_times_s
        if plan.transfer_s:
            durations = durations.copy()
            durations[0] += plan.transfer_s
        run_s = float(np.add.reduce(durations))
        self.busy_s += run_s
        used_now = blocks.n_used
        self._kv_util_time += (used_now * run_s - float(durations @ later_growth)) / blocks.n_blocks
        request_blocks_now = sched.n_request_blocks()
        if request_blocks_now - later_growth[0] > 0:  # blocks only grow in a run: the first step holds the fewest
            self._kv_waste_time += float(durations @ self._run_waste(sched, plan, n_growing, request_blocks_now,
                                                                     block_tokens))
        else:
            tokens = self._run_tokens(sched, plan, n_growing) - n_growing * countdown(k)
            self._waste_where_held(durations, request_blocks_now - later_growth, tokens, blocks.block_size)
        self.n_steps += k
        if self.record_steps:
            run_start_s = start_s - plan.transfer_s
            starts = run_start_s + np.concatenate([[0.0], np.cumsum(durations[:-1])])
            cols = (np.full(k, sched.replica), starts, durations, np.full(k, n_growing), np.zeros(k),
                    np.full(k, plan.req_ids.shape[0]), used_now - later_growth)
            for name, value in zip(STEP_COLUMNS, cols):
                self._steps[name].extend(value)

    def _one_step_run(self, sched: Scheduler, plan: StepPlan) -> None:
        """`run` of a one-step run on Python floats (many are: ranks in lockstep, runs cut at
        arrivals). The same operations bit for bit: its sums and dot products have one term, the
        blocks taken after the step are 0, and the slots held are the request blocks now."""
        blocks = sched.blocks
        duration_s = float(plan.step_times_s[0])
        if plan.transfer_s:
            duration_s += plan.transfer_s
        self.busy_s += duration_s
        self._kv_util_time += blocks.n_used * duration_s / blocks.n_blocks
        request_blocks_now = sched.n_request_blocks()
        if request_blocks_now > 0:
            slots = float(request_blocks_now * blocks.block_size)
            empty = slots - self._run_tokens(sched, plan, plan.req_ids.shape[0] + plan.padded_ids.shape[0])
            self._kv_waste_time += duration_s * (max(empty, 0.0) / slots)
        self.n_steps += 1

    def run_past_finishes(self, sched: Scheduler, plan: StepPlan, contexts: np.ndarray, used_now: int,
                          request_blocks_now: int, released: list[tuple[int, int, int]]) -> None:
        """A committed run past finishes (sim/engine/sched/past_finishes.py), recorded as its single steps
        would have been: `contexts` before the run, the pool's used and request blocks after the run
        took all its blocks, and per finishing step (first step without them, used blocks freed,
        request blocks given up) what releasing the sequences that finished early changed."""
        blocks, k, steps, durations = sched.blocks, plan.n_steps, plan.seq_steps, plan.step_times_s
        size = blocks.block_size
        later_growth = np.add.accumulate(plan.block_taken, dtype=np.float64)
        later_growth -= later_growth[-1]  # minus the blocks taken after each step
        freed, given_up = np.zeros(k + 1), np.zeros(k + 1)
        for step, n_freed, n_given_up in released:
            freed[step] += n_freed
            given_up[step] += n_given_up
        used = np.add.accumulate(freed[:k])
        np.subtract(used_now + later_growth, used, out=used)
        request_blocks = np.add.accumulate(given_up[:k])
        np.subtract(request_blocks_now + later_growth, request_blocks, out=request_blocks)
        tokens = np.add.accumulate(np.bincount(steps, weights=contexts, minlength=k + 1)[:k])  # of those gone
        np.subtract(float(np.add.reduce(contexts)), tokens, out=tokens)
        tokens += plan.n_active * step_numbers(k)  # each has computed one more token per step
        self.busy_s += float(np.add.reduce(durations))
        self._kv_util_time += float(durations @ used) / blocks.n_blocks
        if request_blocks.min() > 0:
            slots = request_blocks * size
            waste = np.subtract(slots, tokens, out=tokens)
            np.maximum(waste, 0.0, out=waste)
            waste /= slots
            self._kv_waste_time += float(durations @ waste)
        else:
            self._waste_where_held(durations, request_blocks, tokens, size)
        self.n_steps += k
        if self.record_steps:
            starts = plan.step_end_s - durations
            cols = (np.full(k, sched.replica), starts, durations, plan.n_active, np.zeros(k), plan.n_active, used)
            for name, value in zip(STEP_COLUMNS, cols):
                self._steps[name].extend(value)

    def _run_tokens(self, sched: Scheduler, plan: StepPlan, n_growing: int) -> float:
        """Tokens cached by running requests after the run's last step."""
        if not plan.padded_ids.size and len(sched.running) == n_growing:  # the run's ids are all running
            return float(np.add.reduce(sched.table.n_computed[plan.req_ids]))
        return self._running_tokens(sched)

    def _run_waste(self, sched: Scheduler, plan: StepPlan, n_growing: int, request_blocks_now: int,
                   block_tokens: np.ndarray) -> np.ndarray:
        """Per step of a run in which requests hold blocks: (slots held - tokens in them) / slots.
        Slots at step s: all held now less those taken after s (integers, so exact in any order)."""
        slots = block_tokens + (request_blocks_now * sched.blocks.block_size - block_tokens[-1])
        empty = slots - self._run_tokens(sched, plan, n_growing)
        empty += n_growing * countdown(plan.n_steps)  # tokens the steps after s add (the run's last has all)
        np.maximum(empty, 0.0, out=empty)
        empty /= slots
        return empty

    @property
    def kv_utilization_mean(self) -> float:
        return self._kv_util_time / self.busy_s if self.busy_s else 0.0

    @property
    def kv_fragmentation(self) -> float:
        return self._kv_waste_time / self.busy_s if self.busy_s else 0.0

    def steps_frame(self) -> pd.DataFrame:
        import pandas as pd  # here: a worker process that only simulates never needs it

        frame = pd.DataFrame({name: buf.array() for name, buf in self._steps.items()})
        for name in ("replica", "batch_size", "prefill_tokens", "decode_tokens", "kv_blocks_used"):
            frame[name] = frame[name].astype(np.int64)
        return frame
