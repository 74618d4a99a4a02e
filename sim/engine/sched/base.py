"""The shared scheduler base: queues, admission, preemption and single steps; decode runs come from
`sim.engine.sched.decode_runs`, committing a finished plan from `sim.engine.sched.commit`.

A policy subclass implements only `schedule(now_s, horizon_s)`; hooks (`on_admit`,
`on_prefill_done`, `on_release`, `make_room`) let the radix policy add prefix reuse.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from sim.cost import CostModel
from sim.cost.hot import SCALAR_MAX_SEQS
from sim.engine.kv.blocks import BlockManager
from sim.engine.metrics import Recorder
from sim.engine.request import RequestTable, Status
from sim.engine.sched.arrivals import Arrivals
from sim.engine.sched.commit import Commits
from sim.engine.sched.decode_runs import DecodeRuns, runs_are_elementwise
from sim.engine.sched.past_finishes import PastFinishes
from sim.engine.sched.plan import StepPlan
from sim.engine.sched.reserve import Reservations
from sim.inputs.config import EngineConfig


class Scheduler(Arrivals, DecodeRuns, PastFinishes, Commits, Reservations):
    """One replica's scheduler. Mutates the shared RequestTable rows of its requests."""

    uses_waiting_order = False  # True when a new arrival may overtake the head of the queue
    holds_arrivals_back = False  # set by the Replica under async scheduling (arrivals join two steps on)
    holds_context = False  # set per step by sim.engine.adp_balance: no prefill work this step (decodes only)
    finished_listener = None  # engine callback(rid) when a request ends (closed-loop clients)
    spec = None  # a sim.engine.spec_decode.SpecDecoder when speculative decoding is on (hook)
    energy = None  # a sim.engine.energy.EnergyMeter when the hardware profile has a power section (hook)

    def __init__(self, cfg: EngineConfig, table: RequestTable, blocks: BlockManager, cost: CostModel,
                 recorder: Recorder, replica: int, max_model_len: int):
        self.cfg, self.table, self.blocks, self.cost = cfg, table, blocks, cost
        self.recorder, self.replica, self.max_model_len = recorder, replica, max_model_len
        self.waiting: deque[int] = deque()
        self.running: list[int] = []
        self.swapped: deque[int] = deque()
        self._preempted_at: dict[int, float] = {}
        self._cow_pending: set[int] = set()  # forked samples whose partial last block is still shared
        # running rows not yet seen decoding: a running row that decodes keeps decoding (a step adds a
        # token to both its computed and its total count) until it leaves, so only these need checking
        self._unsettled: set[int] = set()
        self.init_reservations(cfg)
        self._hot = cost._hot if type(cost) is CostModel else None  # the plain roofline model's scalar paths
        self.prices_runs_ahead = runs_are_elementwise(cost)
        swap_bytes_per_block = blocks.block_size * cost.kv_bytes_per_token_layer_gpu * cost.model.n_layers
        self._swap_s_per_block = swap_bytes_per_block / cost.hw.host_link_bytes_s

    def n_request_blocks(self) -> int:
        """GPU blocks that running requests hold (what fragmentation is measured over)."""
        return self.blocks.n_used

    def has_work(self) -> bool:
        return bool(self.waiting or self.running or self.swapped)

    def blocked_on_transfers(self) -> bool:
        """Blocks held for KV transfers will free up or arrive (sim/engine/disagg): wait, do not reject."""
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
        if self._reserve_full and not self._reserve(rid):
            return None
        self.on_admit(rid, now_s)
        wanted = int(t.n_tokens[rid] - t.n_computed[rid])
        n_new = int(min(wanted, budget_tokens))
        need = self.blocks.blocks_needed(rid, int(t.n_computed[rid]) + n_new)
        if n_new <= 0 or not self.make_room(need, use_watermark=True):
            self.on_admit_failed(rid)
            self.unreserve([rid])
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

    def split_decoding(self, ids: list[int]) -> tuple[list[int], list[int]]:
        """(decoding, not decoding) among `ids` (running rows), each in the given order. Decoding: one
        token left to compute and the whole prompt cached (a prompt's own last token, chunked, is still
        prefill). Only rows that joined the batch since they were last seen decoding are looked at."""
        if self.spec is None:
            if self._unsettled:
                is_decoding, _ = self._split_rows(list(self._unsettled))
                self._unsettled.difference_update(is_decoding)
            if not self._unsettled:
                return list(ids), []
            unsettled = self._unsettled
            return [r for r in ids if r not in unsettled], [r for r in ids if r in unsettled]
        return self._split_rows(ids)

    def _split_rows(self, ids: list[int]) -> tuple[list[int], list[int]]:
        """`split_decoding` by looking at every row."""
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
        self.join_running(rid)

    def join_running(self, rid: int) -> None:
        """`rid` enters the running batch (checked for decoding until it is seen decoding)."""
        self.running.append(rid)
        self._unsettled.add(rid)

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

    def prepare_decodes(self, ids: list[int], now_s: float, grow: bool) -> tuple[list[int], float]:
        """Make room for every decoding request's next token, preempting the newest running
        requests while blocks are short; with `grow`, also take those blocks now (a decode run
        takes its own). Returns the surviving ids and swap transfer seconds."""
        t = self.table
        transfer_s = 0.0
        survivors = list(ids)
        while survivors:
            copies = [r for r in survivors if r in self._cow_pending] if self._cow_pending else []
            if not grow and not copies and self.blocks.n_free >= len(survivors):
                break  # room for a new block each: no need to count the exact need
            full = self._full_blocks(survivors)  # need a new block for their next token
            if self.make_room(len(full) + len(copies)):
                for r in copies:
                    self.blocks.prepare_write(r, int(t.n_computed[r]))
                    self._cow_pending.discard(r)
                if grow and full:
                    self.blocks.grow_by(full, 1)
                break
            victim = self.running[-1]
            transfer_s += self.preempt(victim, now_s)
            if victim in survivors:
                survivors.remove(victim)
        return survivors, transfer_s

    def _full_blocks(self, ids: list[int]) -> list[int]:
        """Those of `ids` whose blocks are full (c % B == 0: their next token needs a new block), in order."""
        n_computed, size = self.table.n_computed, self.blocks.block_size
        if len(ids) <= SCALAR_MAX_SEQS:
            return [r for r in ids if n_computed[r] % size == 0]
        full = n_computed[np.array(ids, dtype=np.int64)] % size == 0
        return [ids[i] for i in full.nonzero()[0].tolist()]

    def preempt(self, rid: int, now_s: float) -> float:
        """Evict a running request: swap its KV to host memory, or drop it to recompute later.
        Returns the swap transfer seconds (0 for recompute)."""
        t = self.table
        self.running.remove(rid)
        self._unsettled.discard(rid)
        t.preemptions[rid] += 1
        self._preempted_at[rid] = now_s
        self.recorder.preemptions += 1
        self.on_release(rid)
        if self._reserved_blocks:
            self.unreserve([rid])
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
    def decode_only_time_s(self, contexts, step: StepPlan | None = None) -> float:
        """Time of one step decoding sequences with these contexts (array or list) and nothing else
        (attribution). `step`: a single step whose new-token-1 sequences are exactly these; its
        costing is reused."""
        if step is not None and step.cost_parts is not None:
            return self._hot.decode_only_s(step.cost_parts)
        contexts = np.asarray(contexts, dtype=np.int64)
        if self.spec is not None:
            return self.spec.decode_step_time_s(contexts)
        n = int(contexts.shape[0])
        if self._hot is not None and n <= SCALAR_MAX_SEQS:
            return self._hot.step_time_s_scalar([1] * n, contexts.tolist(), n)
        return self.cost.step_time_s(np.ones(n, dtype=np.int64), contexts, n)

    def decode_tokens_per_seq(self) -> int:
        """Query tokens a decoding sequence brings to a step (k+1 when it speculates)."""
        return 1 if self.spec is None else self.spec.k + 1

    def single_step(self, ids: list[int], new_tokens: list[int], transfer_s: float = 0.0,
                    n_decoding: int = 0) -> StepPlan:
        """One step of `ids` computing `new_tokens` each; the first `n_decoding` of them are decoding."""
        if self.spec is not None:  # hook: speculative decoding plans every step itself
            return self.spec.plan_step(self, ids, new_tokens, transfer_s)
        t = self.table
        rid = np.array(ids, dtype=np.int64)
        q = np.array(new_tokens, dtype=np.int64)
        c = t.n_computed[rid]
        if len(ids) <= SCALAR_MAX_SEQS:  # the decoding rows each sample; the others when their prompt is done
            n_tokens = t.n_tokens
            n_sampled = n_decoding + sum(1 for r, n_new, n_cached in zip(ids[n_decoding:], new_tokens[n_decoding:],
                                                                         c[n_decoding:].tolist())
                                         if n_cached + n_new == n_tokens[r])
        else:
            n_sampled = int(np.count_nonzero(c + q == t.n_tokens[rid]))
        if self._hot is None or self.recorder.attribution is None:
            return StepPlan(rid, q, np.array([self.cost.step_time_s(q, c, n_sampled)]), transfer_s=transfer_s,
                            n_decoding=n_decoding)
        parts = self._hot.step_parts(q, c)  # kept for attribution's decode-only time (`decode_only_time_s`)
        return StepPlan(rid, q, np.array([self._hot.total_s(parts, n_sampled)]), transfer_s=transfer_s,
                        cost_parts=parts, n_decoding=n_decoding)
