"""The two roles a policy's scheduler can play in a disaggregated cluster (mixins that go in
front of the policy class). Only hand-over points change; admission, batching, preemption and
prefix caching stay the policy's own."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from sim.engine.request import Status

if TYPE_CHECKING:
    from sim.engine.disagg.coordinator import Coordinator


class PrefillRole:
    """Computes prompts: once a request's first token is sampled it leaves the running batch (it
    never decodes here) but keeps its blocks until its KV has landed on a decode replica."""

    coordinator: Coordinator | None = None
    can_run_past_finishes = False  # a finish hands the request over (sim/engine/sched/past_finishes.py)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.handing_off: set[int] = set()
        self._planned: tuple[float, object] | None = None  # (start, plan) of the step in flight

    @property
    def busy_until_s(self) -> float:
        """End of the step in flight (decode replicas' horizon): read from the plan, whose duration a
        lockstep group (sim/engine/lockstep.py) may re-time to its ranks' common step after planning."""
        if self._planned is None:
            return -math.inf
        start_s, plan = self._planned
        return start_s + plan.duration_s

    def schedule(self, now_s: float, horizon_s: float):
        plan = super().schedule(now_s, horizon_s)
        if plan is not None:
            self._planned = (now_s, plan)
        return plan

    def _finish_done(self, candidates: np.ndarray, end_s: float) -> int:
        n_done = super()._finish_done(candidates, end_s)
        t = self.table
        for rid in np.asarray(candidates, dtype=np.int64).tolist():  # base may pass a list (hot path)
            if t.status[rid] == Status.RUNNING and t.n_computed[rid] >= t.prompt_tokens[rid]:
                self.running.remove(rid)
                self._unsettled.discard(rid)
                self.handing_off.add(rid)
                self.coordinator.handoff(self, rid, end_s)
        return n_done

    def output_tokens_held(self, rid: int) -> int:
        """The first token at most: a request's output is decoded elsewhere, so a prompt that fits this
        cache is never refused here for an output that only the decode replica will hold."""
        return min(1, super().output_tokens_held(rid))

    def reservation_tokens(self, rid: int) -> int:
        """Under `reserve_full`, the prompt and first token, never the whole output: TensorRT-LLM's
        disaggregated server sends a context server the request with max_tokens=1 (context_only), so
        GUARANTEED_NO_EVICT reserves prompt + 1 tokens there."""
        return int(self.table.prompt_tokens[rid]) + self.output_tokens_held(rid)

    def release_handed_off(self, rid: int) -> None:
        """The request's KV has landed elsewhere (or it was rejected there): give back everything it
        held here, its blocks and (under `reserve_full`) its reservation, which otherwise stays
        counted until no new prompt fits and the waiting ones are rejected."""
        self.handing_off.discard(rid)
        self.on_release(rid)
        self.unreserve([rid])
        self.blocks.free_request(rid)

    def blocked_on_transfers(self) -> bool:
        return bool(self.handing_off)


class DecodeRole:
    """Generates output: requests arrive with their KV (blocks reserved by the coordinator when
    the transfer started) and join the running batch as decoding sequences."""

    coordinator: Coordinator | None = None
    can_run_past_finishes = False  # freed blocks let waiting transfers start (sim/engine/sched/past_finishes.py)

    def take_transfer_blocks(self, rid: int, n_tokens: int) -> bool:
        """Take blocks for the first `n_tokens` of `rid`'s KV if they fit now (its transfer may then
        start); False leaves it queued. Under `reserve_full` only once its whole prompt + output fits
        beside the running requests' reservations: TensorRT-LLM's capacity scheduler admits a
        generation-only request (DISAGG_GENERATION_INIT) by its blocks to completion, as it does a new
        context, so a decode replica never preempts."""
        if self._reserve_full and not self._reserve(rid):
            return False
        if not self.make_room(self.blocks.blocks_needed(rid, n_tokens)):
            self.unreserve([rid])
            return False
        self.blocks.grow(rid, n_tokens)
        return True

    def accept_transfer(self, rid: int) -> None:
        t = self.table
        t.replica[rid] = self.replica
        t.status[rid] = Status.RUNNING
        self.join_running(rid)

    def commit(self, plan, end_s: float) -> int:
        n_done = super().commit(plan, end_s)
        self.coordinator.start_transfers(self)  # blocks may have been freed
        return n_done

    def blocked_on_transfers(self) -> bool:
        """A transfer on the wire will land (one still queued needs blocks here: it cannot unblock us)."""
        return self.coordinator.n_in_flight(self) > 0
