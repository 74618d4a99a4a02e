"""Decode runs: as many decode steps of the same sequences as can run before anything could change,
planned (and their blocks taken) at once. Mixed into `sim.engine.sched.base.Scheduler`."""

from __future__ import annotations

import math

import numpy as np

from sim.cost.block_residues import blocks_for_steps, residue_counts, whole_block_tokens_per_step
from sim.cost.expert_parallel import ExpertParallelCostModel
from sim.cost.model import CostModel
from sim.engine.sched.plan import StepPlan, ones_int64
from sim.inputs.engines.overhead import EngineCost

MAX_DECODE_RUN_STEPS = 4096  # bounds the arrays of one decode run; runs simply chain beyond it
HORIZON_PROBE_STEPS = 64  # steps costed first when an arrival horizon will likely cut the run short
# runs of at most this many sequences are costed step by step in plain Python up to the arrival horizon
# (per step O(1): the batch enters only through its residue histogram, built once per run)
SCALAR_RUN_MAX_SEQS = 256
SCALAR_GROW_MAX_SEQS = 32  # a run of at most this many sequences finds who takes a block in plain Python


class DecodeRuns:
    """Planning decode runs (needs the Scheduler's table, blocks, cost, swapped queue and spec hook)."""

    # reuse the last costed run's later steps for a batch that is the same sequences some steps on
    # (`_priced_ahead`): set by the Scheduler for cost models whose runs are element-wise in the step
    prices_runs_ahead = False
    # a decode run's blocks are taken by the caller once it knows how many steps run (sim.engine.lockstep)
    defers_run_blocks = False
    _last_run: tuple | None = None  # (contexts, times, KV tokens or None) of the last costed run

    def decode_run(self, ids: list[int], now_s: float, horizon_s: float, transfer_s: float = 0.0,
                   first_step_grown: bool = False, past_finishes: bool = False) -> StepPlan:
        """As many decode steps of `ids` as can run before anything could change: stop at the first
        completion (`past_finishes`: nothing waits for a seat, so go on past finishes when
        `may_pass_finishes`, sim/engine/sched/past_finishes.py), at the step during which `horizon_s` (the
        next relevant arrival) falls, and before blocks would run short. Takes the run's blocks now
        (`first_step_grown`: the tables already hold the first step's, as `prepare_decodes(grow=True)`
        leaves them)."""
        if self.spec is not None:  # hook: speculating sequences take one step at a time
            return self.spec.plan_step(self, ids, [1] * len(ids), transfer_s)
        t, size = self.table, self.blocks.block_size
        rid = np.array(ids, dtype=np.int64)
        contexts = t.n_computed[rid]
        steps_left = t.final_tokens[rid] - t.n_tokens[rid]
        remaining = int(steps_left.min())
        longest = 1 if self.swapped else MAX_DECODE_RUN_STEPS  # a swapped request may return after any step
        k = min(remaining, longest)
        counts = None
        if len(ids) * -(-k // size) > self.blocks.n_free:  # k steps might not fit: count exactly
            counts, _ = residue_counts(contexts, size)
            counts = counts.tolist()
            k = self._steps_blocks_allow(counts, len(ids), k)
        if past_finishes and k == remaining and self.may_pass_finishes(ids, transfer_s, horizon_s):
            plan = self.run_past_finishes(ids, rid, contexts, steps_left, now_s, horizon_s, int(first_step_grown),
                                          remaining)
            if plan is not None:
                return plan
        times, block_tokens = self._run_times(contexts, k, now_s + transfer_s, horizon_s)
        k = times.shape[0]
        if self.defers_run_blocks:  # its group takes them for the steps it runs (take_run_blocks)
            return StepPlan(rid, ones_int64(len(ids)), times, is_decode_run=True, transfer_s=transfer_s,
                            block_tokens=block_tokens, steps_to_first_finish=remaining,
                            blocks_to_take=(ids, contexts, int(first_step_grown)))
        self._grow_run(ids, contexts, k, int(first_step_grown))
        return StepPlan(rid, ones_int64(len(ids)), times, is_decode_run=True, transfer_s=transfer_s,
                        block_tokens=block_tokens, steps_to_first_finish=remaining)

    def _run_times(self, contexts: np.ndarray, k: int, start_s: float, horizon_s: float):
        """(step times, KV tokens in whole blocks or None) of at most k decode steps starting at
        `start_s`, cut after the step during which `horizon_s` falls."""
        if k <= 1 or not math.isfinite(horizon_s):
            return self._costed_run(contexts, k)
        if self._hot is not None and contexts.shape[0] <= SCALAR_RUN_MAX_SEQS:
            scalar = self._hot.decode_steps_until(contexts, k, start_s, horizon_s, HORIZON_PROBE_STEPS)
            if scalar is not None:
                return np.array(scalar[0]), np.array(scalar[1], dtype=np.float64)
        n_probe = min(k, HORIZON_PROBE_STEPS)
        ahead = self._priced_ahead(contexts)
        if ahead is not None and float(ahead[0][0]) + start_s >= horizon_s:  # the probe's cut: one step
            return ahead[0][:1], None if ahead[1] is None else ahead[1][:1]
        if ahead is not None and ahead[0].shape[0] < n_probe:  # fewer steps priced than the probe's
            ends = np.add.accumulate(ahead[0])
            ends += start_s
            if ends[-1] >= horizon_s:  # the probe would cut in these steps: the same cut
                k = int(np.searchsorted(ends, horizon_s)) + 1
                return ahead[0][:k], None if ahead[1] is None else ahead[1][:k]
            ahead = None
        if ahead is not None:
            times, block_tokens = ahead[0][:n_probe], None if ahead[1] is None else ahead[1][:n_probe]
        else:
            times, block_tokens = self._costed_run(contexts, n_probe)
        ends = np.add.accumulate(times)
        ends += start_s
        if ends[-1] < horizon_s and k > times.shape[0]:
            times, block_tokens = self._costed_run(contexts, k)
            ends = np.add.accumulate(times)
            ends += start_s
        k = min(k, int(np.searchsorted(ends, horizon_s)) + 1)
        return times[:k], None if block_tokens is None else block_tokens[:k]

    def _costed_run(self, contexts: np.ndarray, n_steps: int):
        """`cost.decode_run(contexts, n_steps)`, taken from the last run this scheduler costed when
        these contexts are its contexts some steps on (`_priced_ahead`); `prices_runs_ahead`: kept."""
        if self.prices_runs_ahead:
            ahead = self._priced_ahead(contexts)
            if ahead is not None and ahead[0].shape[0] >= n_steps:
                return ahead[0][:n_steps], None if ahead[1] is None else ahead[1][:n_steps]
        times, block_tokens = self.cost.decode_run(contexts, n_steps)
        if self.prices_runs_ahead:
            times.flags.writeable = False  # shared by the plans cut from it
            if block_tokens is not None:
                block_tokens.flags.writeable = False
            self._last_run = (contexts, times, block_tokens)
        return times, block_tokens

    def _priced_ahead(self, contexts: np.ndarray):
        """(times, KV tokens or None) of the decode steps of `contexts` that the last costed run
        already priced, or None. A run's step s of contexts c is its step s - j of contexts c + j:
        every per-step quantity (KV tokens in whole blocks, query-key pairs, the token count) is
        the same integer, and the cost model applies the same element-wise operations to it, so
        the values are the same bit for bit."""
        last = self._last_run
        if last is None or not self.prices_runs_ahead:
            return None
        priced, times, block_tokens = last
        n = contexts.shape[0]
        if n != priced.shape[0] or not n:
            return None
        offset = int(contexts[0]) - int(priced[0])
        if offset < 0 or offset >= times.shape[0] or (contexts - offset).tobytes() != priced.tobytes():
            return None
        return times[offset:], None if block_tokens is None else block_tokens[offset:]

    def _grow_run(self, ids: list[int], contexts: np.ndarray, k: int, n_grown: int) -> None:
        """Take the blocks k decode steps of `ids` need beyond the first `n_grown` (0 or 1) steps'
        (tables hold ceil((c_j + n_grown) / B) blocks): sequence j takes one at each step
        s in [n_grown, k) with s = (-c_j) mod B (mod B)."""
        size = self.blocks.block_size
        if k <= size and len(ids) <= SCALAR_GROW_MAX_SEQS:  # one block at most each, found in one Python pass
            short = [r for r, c in zip(ids, contexts.tolist()) if n_grown <= -c % size < k]
            if short:
                self.blocks.grow_by(short, 1)
            return
        residues = (-contexts) % size
        if k <= size:  # one block at most each
            short = ((residues < k) & (residues >= n_grown) if n_grown else residues < k).nonzero()[0].tolist()
            if short:
                self.blocks.grow_by([ids[i] for i in short], 1)
            return
        counts = (k - 1 - residues) // size + 1
        if n_grown:
            counts[residues == 0] -= 1
        self.blocks.grow_by(ids, counts.tolist())

    def _steps_blocks_allow(self, counts: list[int], n_seqs: int, k: int) -> int:
        """Largest k' <= k whose extra blocks fit in the free pool (k' = 1 always fits here);
        `counts` from `residue_counts`."""
        free = self.blocks.n_free
        if blocks_for_steps(counts, n_seqs, k) <= free:
            return k
        lo, hi = 1, k  # need(lo) fits, need(hi) does not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if blocks_for_steps(counts, n_seqs, mid) <= free else (lo, mid)
        return lo

    def take_run_blocks(self, plan: StepPlan, n_steps: int) -> None:
        """Take the blocks of a deferred decode run's first `n_steps` steps (`defers_run_blocks`: a
        rank in lockstep, whose group runs the fewest steps any rank planned); what taking them all
        and then `truncate_run` would leave, without the round trip."""
        ids, contexts, n_grown = plan.blocks_to_take
        plan.blocks_to_take = None
        self._grow_run(ids, contexts, n_steps, n_grown)

    def truncate_run(self, plan: StepPlan, n_steps: int) -> None:
        """Cut a planned, not yet committed decode run to its first `n_steps` steps (its ranks' group
        runs fewer: sim.engine.lockstep), giving back the blocks it took for the later steps; the caller
        sets its step times."""
        if not plan.is_decode_run or plan.seq_steps is not None or n_steps >= plan.n_steps:
            raise ValueError("only a plain decode run can be cut to fewer steps")
        kept = self.table.n_computed[plan.req_ids] + n_steps
        for rid, n_tokens in zip(plan.req_ids.tolist(), kept.tolist()):
            self.blocks.shrink(rid, n_tokens)

    def run_block_tokens(self, plan: StepPlan) -> np.ndarray:
        """KV tokens, in whole blocks, the requests of a committed decode run hold at each of its
        steps, up to one constant (what matters is what they take after each step: a decode run
        takes its blocks up front, single steps one by one)."""
        if plan.block_tokens is not None:
            return plan.block_tokens
        contexts = self.table.n_computed[plan.req_ids] - plan.n_steps
        return whole_block_tokens_per_step(contexts, plan.n_steps, self.blocks.block_size)


def runs_are_elementwise(cost) -> bool:
    """Whether `cost.decode_run` prices each step of a run from that step's integers alone, with
    the same element-wise operations (`HotPath.decode_run`, or an engine's wrapper of it, which adds
    per-batch constants): then a later run of the same sequences may reuse an earlier run's steps
    (`DecodeRuns._priced_ahead`). Kept to expert-parallel / DP-attention ranks (sim.engine.lockstep)."""
    gpu = cost.gpu if type(cost) is EngineCost else cost
    return isinstance(gpu, ExpertParallelCostModel) and type(gpu).decode_run is CostModel.decode_run
