"""The shared scheduler base: queues, admission, preemption, decode runs and committing a step.

A policy subclass implements only `schedule(now_s, horizon_s)`; hooks (`on_admit`,
`on_prefill_done`, `on_release`, `make_room`) let the radix policy add prefix reuse.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from sim.config import EngineConfig
from sim.cost import CostModel
from sim.cost.hot import SCALAR_MAX_SEQS, blocks_for_steps, residue_counts, whole_block_tokens_per_step
from sim.kv.blocks import BlockManager
from sim.metrics import Recorder
from sim.request import RequestTable, Status
from sim.sched.plan import StepPlan, ones_int64

MAX_DECODE_RUN_STEPS = 4096  # bounds the arrays of one decode run; runs simply chain beyond it
HORIZON_PROBE_STEPS = 64  # steps costed first when an arrival horizon will likely cut the run short
SCALAR_COMMIT_MAX_SEQS = 32  # steps of at most this many sequences commit in one Python pass


class Scheduler:
    """One replica's scheduler. Mutates the shared RequestTable rows of its requests."""

    uses_waiting_order = False  # True when a new arrival may overtake the head of the queue
    finished_listener = None  # engine callback(rid) when a request ends (closed-loop clients)
    spec = None  # a sim.spec_decode.SpecDecoder when speculative decoding is on (hook)

    def __init__(self, cfg: EngineConfig, table: RequestTable, blocks: BlockManager, cost: CostModel,
                 recorder: Recorder, replica: int, max_model_len: int):
        self.cfg, self.table, self.blocks, self.cost = cfg, table, blocks, cost
        self.recorder, self.replica, self.max_model_len = recorder, replica, max_model_len
        self.waiting: deque[int] = deque()
        self.running: list[int] = []
        self.swapped: deque[int] = deque()
        self._preempted_at: dict[int, float] = {}
        self._cow_pending: set[int] = set()  # forked samples whose partial last block is still shared
        self._hot = cost._hot if type(cost) is CostModel else None  # the plain roofline model's scalar paths
        swap_bytes_per_block = blocks.block_size * cost.kv_bytes_per_token_layer_gpu * cost.model.n_layers
        self._swap_s_per_block = swap_bytes_per_block / cost.hw.host_link_bytes_s

    # ------------------------------------------------------------------ arrivals
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
        total = prompt + int(t.output_tokens[rid])
        n_samples = len(t.rows_of(rid))
        shared = prompt // b.block_size  # full prompt blocks all samples share
        need = shared + n_samples * (-(-total // b.block_size) - shared)
        if need > b.n_blocks - b.watermark_blocks:
            return f"prompt+output need {need} KV blocks; the cache holds {b.n_blocks}"
        return None

    def _reject(self, rid: int, reason: str, now_s: float) -> None:
        t = self.table
        t.reject(rid, reason, now_s)
        if self.finished_listener is not None and t.is_request_done(rid):
            self.finished_listener(int(t.sample_of[rid]))

    def reject_unschedulable(self, now_s: float) -> None:
        """Nothing runs yet the head of the queue cannot start: reject it rather than wait forever."""
        rid = self.waiting.popleft()
        self._reject(rid, "could not be scheduled with the configured limits", now_s)

    def run_block_growth(self, plan: StepPlan) -> np.ndarray:
        """Blocks the run's requests will still take after each step of a committed decode run
        (0 after the last): a decode run takes its blocks up front, single steps one by one."""
        size = self.blocks.block_size
        block_tokens = plan.block_tokens
        if block_tokens is None:
            contexts = self.table.n_computed[plan.req_ids] - plan.n_steps
            block_tokens = whole_block_tokens_per_step(contexts, plan.n_steps, size)
        return (block_tokens[-1] - block_tokens) / size

    def n_request_blocks(self) -> int:
        """GPU blocks that running requests hold (what fragmentation is measured over)."""
        return self.blocks.n_used

    def has_work(self) -> bool:
        return bool(self.waiting or self.running or self.swapped)

    def blocked_on_transfers(self) -> bool:
        """Blocks held for KV transfers will free up or arrive (sim/disagg): wait, do not reject."""
        return False

    def n_outstanding(self) -> int:
        return len(self.waiting) + len(self.running) + len(self.swapped)

    # ------------------------------------------------------------------ policy
    def schedule(self, now_s: float, horizon_s: float) -> StepPlan | None:  # pragma: no cover
        raise NotImplementedError

    # ------------------------------------------------------------------ hooks (radix overrides)
    def on_admit(self, rid: int, now_s: float) -> None:
        """First scheduling of a waiting request (prefix matching goes here)."""

    def on_admit_failed(self, rid: int) -> None:
        """Undo on_admit when the request did not fit after all."""

    def on_prefill_done(self, rid: int, now_s: float) -> None:
        """All prompt tokens of the request are in the cache."""

    def on_release(self, rid: int) -> None:
        """The request gives up its blocks (finished or preempted)."""

    def make_room(self, n_blocks: int, use_watermark: bool = False) -> bool:
        """True if n_blocks can be allocated now (radix evicts cached prefixes to get there)."""
        return self.blocks.can_allocate(n_blocks, use_watermark)

    # ------------------------------------------------------------------ admission
    def try_admit(self, rid: int, budget_tokens: float, now_s: float) -> int | None:
        """Give the waiting head `rid` blocks for up to `budget_tokens` new tokens.

        Returns the tokens scheduled (the caller moves it to running), or None if it does not fit.
        """
        t = self.table
        self.on_admit(rid, now_s)
        wanted = int(t.n_tokens[rid] - t.n_computed[rid])
        n_new = int(min(wanted, budget_tokens))
        need = self.blocks.blocks_needed(rid, int(t.n_computed[rid]) + n_new)
        if n_new <= 0 or not self.make_room(need, use_watermark=True):
            self.on_admit_failed(rid)
            return None
        self.blocks.grow(rid, int(t.n_computed[rid]) + n_new)
        self._mark_running(rid, now_s)
        return n_new

    def fork_samples(self, rid: int, now_s: float) -> list[int]:
        """Parallel sampling: once a request's prompt is cached, each of its other samples starts
        as a copy sharing every prompt block (ref-counted); a shared partially filled last block
        is copied on the first write. Returns the sample rows started now."""
        t = self.table
        rows = [c for c in t.children.get(rid, ()) if t.status[c] == Status.PENDING]
        for child in rows:
            self.blocks.fork(rid, child)
            t.n_computed[child] = t.n_computed[rid]
            t.n_tokens[child] = t.n_tokens[rid]
            t.first_token_s[child] = t.last_token_s[child] = t.first_token_s[rid]
            t.arrival_s[child] = t.arrival_s[rid]
            self._mark_running(child, now_s)
        if rows and t.n_computed[rid] % self.blocks.block_size:
            self._cow_pending.update([rid, *rows])
        return rows

    def is_decoding(self, rid: int) -> bool:
        """One token left to compute and the whole prompt already cached: the next step is a decode.
        (A prompt's own last token, under chunking, is still prefill: it yields the first token.)"""
        t = self.table
        return t.n_tokens[rid] - t.n_computed[rid] == 1 and t.n_computed[rid] >= t.prompt_tokens[rid]

    def split_decoding(self, ids: list[int]) -> tuple[list[int], list[int]]:
        """(decoding, not decoding) among `ids`, each in the given order (`is_decoding` for many)."""
        t = self.table
        if len(ids) <= SCALAR_MAX_SEQS:
            decoding, other = [], []
            n_tokens, n_computed, prompt_tokens = t.n_tokens, t.n_computed, t.prompt_tokens
            for r in ids:
                computed = n_computed[r]
                (decoding if n_tokens[r] - computed == 1 and computed >= prompt_tokens[r] else other).append(r)
            return decoding, other
        rid = np.array(ids, dtype=np.int64)
        computed = t.n_computed[rid]
        is_decoding = ((t.n_tokens[rid] - computed) == 1) & (computed >= t.prompt_tokens[rid])
        if is_decoding.all():
            return list(ids), []
        flags = is_decoding.tolist()
        return [r for r, d in zip(ids, flags) if d], [r for r, d in zip(ids, flags) if not d]

    def _mark_running(self, rid: int, now_s: float) -> None:
        t = self.table
        t.status[rid] = Status.RUNNING
        if np.isnan(t.scheduled_s[rid]):
            t.scheduled_s[rid] = now_s
        since = self._preempted_at.pop(rid, None)
        if since is not None:
            t.preempted_s[rid] += now_s - since
        self.running.append(rid)

    def swap_in_ready(self, now_s: float) -> float:
        """Bring swapped requests back while blocks allow (oldest first); returns transfer seconds."""
        moved = 0
        while self.swapped:
            rid = self.swapped[0]
            if not self.make_room(self.blocks.n_swapped_blocks(rid)):
                break
            moved += self.blocks.swap_in(rid)
            self.swapped.popleft()
            self._mark_running(rid, now_s)
        return moved * self._swap_s_per_block

    # ------------------------------------------------------------------ preemption
    def _held_blocks(self, contexts: np.ndarray) -> np.ndarray:
        """Blocks each running request holds. Tables always grow exactly to the tokens scheduled,
        so between steps a table covers ceil(n_computed / B) blocks (`check_tables` asserts it)."""
        return -(-contexts // self.blocks.block_size)

    def check_tables(self) -> None:
        """Invariant check for tests: every running request's table matches its token count."""
        for rid in self.running:
            held = len(self.blocks.table(rid))
            expected = int(self._held_blocks(self.table.n_computed[rid]))
            if held != expected:
                raise AssertionError(f"request {rid}: table has {held} blocks, expected {expected}")

    def _grow_to(self, ids, contexts: np.ndarray, held: np.ndarray, n_tokens_ahead: int) -> None:
        """Grow the tables of `ids` to cover contexts + n_tokens_ahead tokens (only those short)."""
        size = self.blocks.block_size
        short = (-(-(contexts + n_tokens_ahead) // size) > held).nonzero()[0].tolist()
        if short:
            self.blocks.grow_many([ids[i] for i in short], (contexts[short] + n_tokens_ahead).tolist())

    def prepare_decodes(self, ids: list[int], now_s: float, grow: bool) -> tuple[list[int], float]:
        """Make room for every decoding request's next token, preempting the newest running
        requests while blocks are short; with `grow`, also take those blocks now (a decode run
        takes its own). Returns the surviving ids and swap transfer seconds."""
        t, size = self.table, self.blocks.block_size
        transfer_s = 0.0
        survivors = list(ids)
        while survivors:
            copies = [r for r in survivors if r in self._cow_pending] if self._cow_pending else []
            if not grow and not copies and self.blocks.n_free >= len(survivors):
                break  # room for a new block each: no need to count the exact need
            contexts = t.n_computed[np.array(survivors, dtype=np.int64)]
            # a sequence needs a new block for its next token when its blocks are full (c % B == 0)
            full = contexts % size == 0
            need = int(np.count_nonzero(full)) + len(copies)
            if self.make_room(need):
                for r in copies:
                    self.blocks.prepare_write(r, int(t.n_computed[r]))
                    self._cow_pending.discard(r)
                if grow and need > len(copies):
                    self.blocks.grow_by([survivors[i] for i in full.nonzero()[0].tolist()], 1)
                break
            victim = self.running[-1]
            transfer_s += self.preempt(victim, now_s)
            if victim in survivors:
                survivors.remove(victim)
        return survivors, transfer_s

    def preempt(self, rid: int, now_s: float) -> float:
        """Evict a running request: swap its KV to host memory, or drop it to recompute later.
        Returns the swap transfer seconds (0 for recompute)."""
        t = self.table
        self.running.remove(rid)
        t.preemptions[rid] += 1
        self._preempted_at[rid] = now_s
        self.recorder.preemptions += 1
        self.on_release(rid)
        self._cow_pending.discard(rid)  # recompute rebuilds private blocks; a swap copies them
        n_held = len(self.blocks.table(rid))
        if self.cfg.preemption_mode == "swap" and self.blocks.n_cpu_free >= n_held:
            self.blocks.swap_out(rid)
            t.status[rid] = Status.SWAPPED
            self.swapped.append(rid)
            return n_held * self._swap_s_per_block
        self.blocks.free_request(rid)
        t.n_computed[rid] = 0
        t.status[rid] = Status.WAITING
        self.waiting.appendleft(rid)
        return 0.0

    # ------------------------------------------------------------------ plans
    def decode_only_time_s(self, contexts: np.ndarray) -> float:
        """Time of one step decoding sequences with these contexts and nothing else (attribution)."""
        if self.spec is not None:
            return self.spec.decode_step_time_s(contexts)
        n = int(contexts.shape[0])
        if self._hot is not None and n <= SCALAR_MAX_SEQS:
            return self._hot.step_time_s_scalar([1] * n, contexts.tolist(), n)
        return self.cost.step_time_s(np.ones(n, dtype=np.int64), contexts, n)

    def decode_tokens_per_seq(self) -> int:
        """Query tokens a decoding sequence brings to a step (k+1 when it speculates)."""
        return 1 if self.spec is None else self.spec.k + 1

    def single_step(self, ids: list[int], new_tokens: list[int], transfer_s: float = 0.0) -> StepPlan:
        if self.spec is not None:  # hook: speculative decoding plans every step itself
            return self.spec.plan_step(self, ids, new_tokens, transfer_s)
        t = self.table
        rid = np.array(ids, dtype=np.int64)
        q = np.array(new_tokens, dtype=np.int64)
        c = t.n_computed[rid]
        if len(ids) <= SCALAR_MAX_SEQS:
            n_tokens = t.n_tokens
            n_sampled = sum(1 for r, n_new, n_cached in zip(ids, new_tokens, c.tolist())
                            if n_cached + n_new == n_tokens[r])
        else:
            n_sampled = int(np.count_nonzero(c + q == t.n_tokens[rid]))
        time_s = self.cost.step_time_s(q, c, n_sampled)
        return StepPlan(rid, q, np.array([time_s]), transfer_s=transfer_s)

    def decode_run(self, ids: list[int], now_s: float, horizon_s: float, transfer_s: float = 0.0,
                   first_step_grown: bool = False) -> StepPlan:
        """As many decode steps of `ids` as can run before anything could change: stop at the first
        completion, at the step during which `horizon_s` (the next relevant arrival) falls, and
        before blocks would run short. Takes the run's blocks now (`first_step_grown`: the tables
        already hold the first step's, as `prepare_decodes(grow=True)` leaves them)."""
        if self.spec is not None:  # hook: speculating sequences take one step at a time
            return self.spec.plan_step(self, ids, [1] * len(ids), transfer_s)
        t, size = self.table, self.blocks.block_size
        rid = np.array(ids, dtype=np.int64)
        contexts = t.n_computed[rid]
        remaining = int((t.final_tokens[rid] - t.n_tokens[rid]).min())
        longest = 1 if self.swapped else MAX_DECODE_RUN_STEPS  # a swapped request may return after any step
        k = min(remaining, longest)
        counts = None
        if len(ids) * -(-k // size) > self.blocks.n_free:  # k steps might not fit: count exactly
            counts, _ = residue_counts(contexts, size)
            counts = counts.tolist()
            k = self._steps_blocks_allow(counts, len(ids), k)
        scalar = None
        if k > 1 and math.isfinite(horizon_s) and self._hot is not None and len(ids) <= SCALAR_MAX_SEQS:
            scalar = self._hot.decode_steps_until(contexts.tolist(), k, now_s + transfer_s, horizon_s,
                                                  HORIZON_PROBE_STEPS)
        if scalar is not None:
            times, block_tokens = np.array(scalar[0]), np.array(scalar[1], dtype=np.float64)
            k = times.shape[0]
        elif k > 1 and math.isfinite(horizon_s):
            times, block_tokens = self.cost.decode_run(contexts, min(k, HORIZON_PROBE_STEPS))
            ends = np.add.accumulate(times)
            ends += now_s + transfer_s
            if ends[-1] < horizon_s and k > times.shape[0]:
                times, block_tokens = self.cost.decode_run(contexts, k)
                ends = np.add.accumulate(times)
                ends += now_s + transfer_s
            k = min(k, int(np.searchsorted(ends, horizon_s)) + 1)
            times = times[:k]
            block_tokens = None if block_tokens is None else block_tokens[:k]
        else:
            times, block_tokens = self.cost.decode_run(contexts, k)
        self._grow_run(ids, contexts, k, int(first_step_grown))
        return StepPlan(rid, ones_int64(len(ids)), times, is_decode_run=True, transfer_s=transfer_s,
                        block_tokens=block_tokens, steps_to_first_finish=remaining)

    def _grow_run(self, ids: list[int], contexts: np.ndarray, k: int, n_grown: int) -> None:
        """Take the blocks k decode steps of `ids` need beyond the first `n_grown` (0 or 1) steps'
        (tables hold ceil((c_j + n_grown) / B) blocks): sequence j takes one at each step
        s in [n_grown, k) with s = (-c_j) mod B (mod B)."""
        size = self.blocks.block_size
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

    # ------------------------------------------------------------------ commit
    def commit(self, plan: StepPlan, end_s: float) -> int:
        """Apply a finished plan at `end_s`: advance tokens, stamp first-token/finish times,
        record inter-token gaps, free the blocks of finished requests. Returns how many finished."""
        if self.recorder.attribution is not None:  # hook: latency attribution (sim/attribution.py)
            self.recorder.attribution.on_plan(plan, end_s, self)
        if plan.is_decode_run:
            return self._commit_decode_run(plan, end_s)
        if plan.req_ids.size == 0:
            return 0  # an idle wait (static batching window)
        return self._commit_step(plan, end_s)

    def _commit_step(self, plan: StepPlan, end_s: float) -> int:
        if plan.req_ids.shape[0] <= SCALAR_COMMIT_MAX_SEQS and plan.spec_extra is None:
            return self._commit_step_scalar(plan, end_s)
        t = self.table
        rid, q = plan.req_ids, plan.new_tokens
        t.n_computed[rid] += q
        is_sampled = t.n_computed[rid] == t.n_tokens[rid]
        sampled = rid[is_sampled]
        t.n_tokens[sampled] += 1
        first = np.isnan(t.first_token_s[sampled])
        t.first_token_s[sampled[first]] = end_s
        later = sampled[~first]
        if later.size:
            self.recorder.add_gaps(end_s - t.last_token_s[later])
        t.last_token_s[sampled] = end_s
        if plan.spec_extra is not None:  # hook: speculative decoding keeps its accepted proposals
            t.n_computed[rid] += plan.spec_extra
            t.n_tokens[rid] += plan.spec_extra
        prefill_done = sampled[first | (q[is_sampled] > 1)]
        forked: list[int] = []
        for r in prefill_done.tolist():
            self.on_prefill_done(r, end_s)
            forked += self.fork_samples(r, end_s)
        if forked:
            sampled = np.concatenate([sampled, np.asarray(forked, dtype=np.int64)])
        self.recorder.step(self, end_s, plan, int(q[q > 1].sum()), int(np.count_nonzero(q == 1)))
        return self._finish_done(sampled, end_s)

    def _commit_step_scalar(self, plan: StepPlan, end_s: float) -> int:
        """`_commit_step` for a few sequences, one Python pass (same effects, same order)."""
        t = self.table
        n_computed, n_tokens, first_token_s, last_token_s = t.n_computed, t.n_tokens, t.first_token_s, t.last_token_s
        sampled: list[int] = []
        prefill_done: list[int] = []
        gaps: list[float] = []
        prefill_tokens = decode_tokens = 0
        for r, n_new in zip(plan.req_ids.tolist(), plan.new_tokens.tolist()):
            if n_new > 1:
                prefill_tokens += n_new
            elif n_new == 1:
                decode_tokens += 1
            computed = n_computed[r] + n_new
            n_computed[r] = computed
            if computed != n_tokens[r]:
                continue
            n_tokens[r] = computed + 1
            sampled.append(r)
            if math.isnan(first_token_s[r]):
                first_token_s[r] = end_s
                prefill_done.append(r)
            else:
                gaps.append(end_s - last_token_s[r])
                if n_new > 1:
                    prefill_done.append(r)
            last_token_s[r] = end_s
        if gaps:
            self.recorder.add_gaps(np.array(gaps))
        for r in prefill_done:
            self.on_prefill_done(r, end_s)
            sampled += self.fork_samples(r, end_s)
        self.recorder.step(self, end_s, plan, prefill_tokens, decode_tokens)
        return self._finish_done(sampled, end_s)

    def _commit_decode_run(self, plan: StepPlan, end_s: float) -> int:
        t = self.table
        rid, k = plan.req_ids, plan.n_steps
        start_s = end_s - plan.duration_s + plan.transfer_s
        first_end_s = start_s + plan.step_times_s[0]
        self.recorder.add_run_gaps(first_end_s - t.last_token_s[rid], plan.step_times_s[1:])
        t.n_computed[rid] += k
        t.n_tokens[rid] += k
        t.last_token_s[rid] = end_s
        self.recorder.run(self, start_s, plan)
        if plan.steps_to_first_finish is not None and k < plan.steps_to_first_finish:
            return 0  # nobody reached their last token
        return self._finish_done(rid, end_s)

    def _finish_done(self, candidates: np.ndarray | list[int], end_s: float) -> int:
        t = self.table
        if isinstance(candidates, list):
            done = [r for r in candidates if t.n_tokens[r] >= t.final_tokens[r]]
        else:
            done = candidates[t.n_tokens[candidates] >= t.final_tokens[candidates]].tolist()
        if not done:
            return 0
        done_set = set(done)
        self.running = [r for r in self.running if r not in done_set]
        for r in done:
            t.status[r] = Status.FINISHED
            t.finish_s[r] = end_s
            self.on_release(r)
            self.blocks.free_request(r)
            self._cow_pending.discard(r)
            if self.finished_listener is not None and t.is_request_done(r):
                self.finished_listener(int(t.sample_of[r]))
        return len(done)
