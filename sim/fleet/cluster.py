"""A fleet of replicas that changes over the day: launched (ready after a cold start), drained
(no new requests; queued ones go back to the router, running ones finish), failed (halted at
once; its requests retried elsewhere or lost; its GPUs out of the pool for the repair time).

The router sends only to ready replicas; with none ready, arrivals wait in the fleet's backlog.
Replica lifecycles are kept for billing (`FleetReplica` launch/ready/stop times and kind).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass

import numpy as np
import simpy

from sim.engine.kv.blocks import BlockManager
from sim.engine.metrics import Recorder
from sim.engine.replica import Replica
from sim.engine.routers.registry import make_router
from sim.engine.routers.simple import RoundRobinRouter
from sim.engine.sched.registry import make_scheduler
from sim.inputs.hardware import GIB

STARTING, READY, DRAINING, FAILED, STOPPED = "starting", "ready", "draining", "failed", "stopped"


class DayRecorder(Recorder):
    """A replica's recorder over a day: step counts and busy time only. Inter-token gaps would grow
    with steps, and a day reports no KV utilisation or fragmentation from recorders (the autoscaler
    reads the block pools), so their per-step accounting (a tenth of a replay's time) is skipped."""

    def add_unit_gaps(self, values, rows) -> None:
        pass

    def add_run_gaps(self, first_gaps, later_steps_s, rows, later_weights=None, seq_steps=None) -> None:
        pass

    def step(self, sched, end_s: float, plan, prefill_tokens: int, decode_tokens: int) -> None:
        self.busy_s += plan.duration_s
        self.n_steps += 1

    def run(self, sched, start_s: float, plan) -> None:
        self.busy_s += float(np.add.reduce(plan.step_times_s)) + plan.transfer_s
        self.n_steps += plan.n_steps

    def run_past_finishes(self, sched, plan, contexts, used_now: int, request_blocks_now: int, released) -> None:
        self.busy_s += float(np.add.reduce(plan.step_times_s))
        self.n_steps += plan.n_steps


@dataclass
class FleetReplica:
    index: int
    kind: str  # reserved | on_demand | spot
    launch_s: float
    ready_s: float
    state: str = STARTING
    stop_s: float | None = None
    replica: Replica | None = None


class Fleet:
    """Replica lifecycle and routing for one day. `source` is the day's arrival source (its
    `add_event` makes a time a horizon for every replica's decode runs)."""

    def __init__(self, env: simpy.Environment, cfg, table, tally, source, memory, cost, max_model_len: int,
                 cold_start_s: float, on_failure: str, repair_s: float, rng: np.random.Generator,
                 gpus_per_replica: int, router: str):
        self.env, self.cfg, self.table, self.tally, self.source = env, cfg, table, tally, source
        self.memory, self.cost, self.max_model_len = memory, cost, max_model_len
        self.cold_start_s, self.on_failure, self.repair_s = cold_start_s, on_failure, repair_s
        self.rng, self.gpus_per_replica = rng, gpus_per_replica
        self.router = make_router(router, np.random.default_rng(cfg.seed))
        self.replicas: list[FleetReplica] = []  # every one launched, in launch order
        self.by_index: dict[int, FleetReplica] = {}
        self.ready: list[Replica] = []  # routable, in launch order
        self.ready_position: dict[int, int] = {}  # replica index -> its place in `ready`
        self.round_robin = self.router if isinstance(self.router, RoundRobinRouter) else None
        self.backlog: deque[int] = deque()
        self.repairs_until_s: list[float] = []  # heap: when failed GPUs come back to the pool
        self.recorders: list[Recorder] = []
        self.n_failures = 0
        self.failure_listeners: list = []  # callback(fleet_replica) when a replica becomes ready (failure draws)

    # ------------------------------------------------------------------ counts
    def live(self, *states: str) -> list[FleetReplica]:
        return [r for r in self.replicas if r.state in states]

    def n_in_repair(self) -> int:
        while self.repairs_until_s and self.repairs_until_s[0] <= self.env.now:
            heapq.heappop(self.repairs_until_s)
        return len(self.repairs_until_s)

    # ------------------------------------------------------------------ lifecycle
    def launch(self, kind: str, ready_now: bool = False) -> FleetReplica:
        now = self.env.now
        fr = FleetReplica(len(self.replicas), kind, now, now if ready_now else now + self.cold_start_s)
        self.replicas.append(fr)
        self.by_index[fr.index] = fr
        if ready_now:
            self._make_ready(fr)
        else:
            self.source.add_event(fr.ready_s)
            self.env.process(self._cold_start(fr))
        return fr

    def _cold_start(self, fr: FleetReplica):
        yield self.env.timeout(fr.ready_s - self.env.now)
        if fr.state == STARTING:
            self._make_ready(fr)

    def _make_ready(self, fr: FleetReplica) -> None:
        cfg, memory = self.cfg, self.memory
        n_blocks = cfg.num_gpu_blocks_override or memory.num_gpu_blocks
        cpu_blocks = int(cfg.swap_space * GIB // (cfg.block_size * memory.kv_bytes_per_token_per_gpu))
        blocks = BlockManager(n_blocks, cfg.block_size, int(cfg.watermark * n_blocks), cpu_blocks)
        recorder = DayRecorder(False)
        self.recorders.append(recorder)
        sched = make_scheduler(cfg, self.table, blocks, self.cost, recorder, fr.index, self.max_model_len)
        sched.finished_listener = self.source.on_ended
        fr.replica, fr.state, fr.ready_s = Replica(self.env, sched, self.source), READY, self.env.now
        self._set_ready([*self.ready, fr.replica])
        for listener in self.failure_listeners:
            listener(fr)
        while self.backlog:
            self.dispatch(self.backlog.popleft())

    def cancel_or_drain(self, fr: FleetReplica) -> None:
        """Scale one replica in: a starting one is cancelled, a ready one drained."""
        if fr.state == STARTING:
            fr.state, fr.stop_s = STOPPED, self.env.now
            return
        fr.state = DRAINING
        self._set_ready([r for r in self.ready if r is not fr.replica])
        sched = fr.replica.sched
        never_started = [row for row in sched.waiting if math.isnan(self.table.scheduled_s[row])]
        never_started += fr.replica.take_pending()
        if never_started:  # back to the router; preempted ones finish here
            moved = set(never_started)
            sched.waiting = deque(row for row in sched.waiting if row not in moved)
            for row in never_started:
                self.dispatch(row)
        self.stop_if_drained(fr)

    def stop_if_drained(self, fr: FleetReplica) -> None:
        if fr.state == DRAINING and not fr.replica.sched.has_work():
            fr.state, fr.stop_s = STOPPED, self.env.now
            fr.replica.halted = True
            fr.replica.wake()

    def fail(self, fr: FleetReplica) -> None:
        """The replica dies now: the step in flight is lost; its requests are retried or lost."""
        if fr.state in (STOPPED, FAILED):
            return
        self.n_failures += 1
        was_starting = fr.state == STARTING
        fr.state, fr.stop_s = FAILED, self.env.now
        heapq.heappush(self.repairs_until_s, self.env.now + self.repair_s)
        if was_starting:
            return
        self._set_ready([r for r in self.ready if r is not fr.replica])
        fr.replica.halted = True
        fr.replica.wake()
        sched = fr.replica.sched
        rows = [*sched.running, *sched.waiting, *sched.swapped, *fr.replica.take_pending()]
        sched.running, sched.waiting, sched.swapped = [], deque(), deque()
        for row in rows:
            if self.on_failure == "retry":
                self.tally.add("retried", float(self.table.arrival_s[row]))
                if self.source.minute_tally is not None:
                    self.source.minute_tally.add("retried", float(self.table.arrival_s[row]))
                self.table.restart(row)
                self.dispatch(row)
            else:
                self.table.reject(row, "its replica failed", self.env.now)
                self.source.on_ended(row, lost=True)

    # ------------------------------------------------------------------ routing
    def _set_ready(self, ready: list[Replica]) -> None:
        self.ready = ready
        self.ready_position = {replica.sched.replica: i for i, replica in enumerate(ready)}

    def dispatch(self, row: int) -> None:
        if not self.ready:
            self.backlog.append(row)
            return
        self.ready[self.router.pick(row, self.ready, self.env.now)].add(row)

    def metrics(self) -> dict:
        """What the engines export, over the ready replicas (sums; kv_usage: the mean share)."""
        scheds = [replica.sched for replica in self.ready]
        kv = [s.blocks.n_used / s.blocks.n_blocks for s in scheds]
        return {"queue_length": sum(len(s.waiting) for s in scheds) + len(self.backlog),
                "running": sum(len(s.running) for s in scheds),
                "kv_usage": float(np.mean(kv)) if kv else 0.0}



def exponential_s(rng: np.random.Generator, rate_per_h: float) -> float:
    return math.inf if rate_per_h <= 0 else float(rng.exponential(3600.0 / rate_per_h))
