"""SimPy glue only: arrivals (open or closed loop), replicas and the router between them.

Each replica is a SimPy process: schedule -> cost -> timeout -> commit, sleeping on an event
while it has nothing to do. `horizon` passed to the scheduler is the time of the next arrival that
could join that replica (the next arrival of all, unless the router decides every replica up front),
so a decode run never skips past a moment at which a new request could join. A fleet
(sim/fleet) also counts its autoscaler's decision times as horizons, and may halt a replica.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import simpy

from sim.engine.routers.simple import Router
from sim.engine.sched.base import Scheduler
from sim.inputs.workload.trace import ClosedLoop


class Replica:
    """`async_scheduling` (vLLM V1's async scheduler, SGLang's overlap scheduler): the batch of step
    n+1 is formed when step n is launched, so a request arriving while step n runs cannot join
    step n+1; it waits in `_pending` and joins step n+2. An idle replica takes an arrival at once."""

    # sim.fleet sets it when the replica fails: its loop ends at its next wake (the step in flight,
    # if any, is lost uncommitted). Never set without a fleet, so other runs are unchanged.
    halted = False

    def __init__(self, env: simpy.Environment, sched: Scheduler, source: ArrivalSource,
                 async_scheduling: bool = False):
        self.env, self.sched, self.source = env, sched, source
        self._idle: simpy.Event | None = None
        self.async_scheduling = sched.holds_arrivals_back = async_scheduling
        self._pending: list[tuple[int, float]] = []  # (rid, arrival) held back one step (async scheduling)
        self._in_flight = False  # a plan is running
        self._last_step_start_s = -math.inf  # when the last step of the plan in flight (or just ended) began
        self._start()

    def _start(self) -> None:
        """Start this replica's loop (sim.engine.lockstep.LockstepRank: its group's loop runs it instead)."""
        self.env.process(self._loop())

    def add(self, rid: int) -> None:
        if self.async_scheduling and self._in_flight:
            self._pending.append((rid, self.env.now))
            return
        self.sched.add(rid, self.env.now)
        self.wake()

    def take_pending(self) -> list[int]:
        """The arrivals held back for the next step (async scheduling), handed over and forgotten
        (sim.fleet: a failing or draining replica passes them back to the router)."""
        rows = [rid for rid, _ in self._pending]
        self._pending = []
        return rows

    def _admit_pending(self, everyone: bool) -> None:
        """Hand the scheduler the held-back arrivals that the step about to be planned could see:
        those that arrived before the step that just ended began (all of them if `everyone`)."""
        keep = []
        for rid, arrived_s in self._pending:
            if everyone or arrived_s < self._last_step_start_s:
                self.sched.add(rid, self.env.now)
            else:
                keep.append((rid, arrived_s))
        self._pending = keep

    def _horizon_s(self) -> float:
        """A decode run must stop where a new request could join: after one step while arrivals
        are held back (they join the step after next), else at the next arrival."""
        if self._pending:
            return self.env.now
        return self.source.next_arrival_s(self.sched.replica)

    def wake(self) -> None:
        """Resume the loop if it sleeps (a request arrived, or KV landed / was freed: sim/engine/disagg)."""
        if self._idle is not None and not self._idle.triggered:
            self._idle.succeed()

    def _loop(self):
        env, sched = self.env, self.sched
        while True:
            if self._pending:
                self._admit_pending(everyone=False)
            plan = sched.schedule(env.now, self._horizon_s()) if sched.has_work() else None
            if plan is None:
                if self._pending:  # nothing else to run: the engine is idle and takes them now
                    self._admit_pending(everyone=True)
                    continue
                if sched.has_work() and not sched.running and not sched.blocked_on_transfers():
                    sched.reject_unschedulable(env.now)
                    continue
                self._idle = env.event()
                yield self._idle
                self._idle = None
                if self.halted:
                    return
                continue
            start_s = env.now
            self._in_flight = True
            yield env.timeout(plan.duration_s)
            self._in_flight = False
            if self.halted:
                return
            if self.async_scheduling:  # only the held-back arrivals read it
                self._last_step_start_s = start_s + plan.duration_s - float(plan.step_times_s[-1])
            finished = sched.commit(plan, env.now)
            if finished and self.source.reacts_to_completions:
                yield env.timeout(0)  # let clients send their next request before we schedule


class ArrivalSource:
    """Open loop: replay the trace's arrival times. When the router decides every replica up front
    (`Router.assign_all`), each replica's horizon is its own next arrival (others cannot join it) and
    its arrivals come from a process of its own, timed from its own previous arrival: its clock
    then never depends on other replicas' requests (SimPy lands a timeout at now + delay, which can
    be an ulp off `arrival` in rare ties), so it runs as it would alone (sim.run.replica_split)."""

    reacts_to_completions = False

    def __init__(self, env: simpy.Environment, arrival_s, router: Router,
                 progress: Callable[[int, int], None] | None = None):
        self.env, self.arrival_s, self.router, self.progress = env, arrival_s, router, progress
        self.replicas: list[Replica] = []
        self._n_arrived = 0
        self._replica_of: np.ndarray | None = None  # each arrival's replica, when decided up front
        self._own: list[np.ndarray] = []  # per replica: its arrivals' times, in order
        self._own_next: list[int] = []  # per replica: how many of them have arrived

    @property
    def replica_blind(self) -> bool:
        """Whether `next_arrival_s` is the same for every replica (sim.engine.lockstep asks it once)."""
        return self._replica_of is None

    def next_arrival_s(self, replica: int | None = None) -> float:
        """The time of the next arrival that could join `replica` (of any arrival: None)."""
        if replica is not None and self._replica_of is not None:
            own, done = self._own[replica], self._own_next[replica]
            return float(own[done]) if done < own.shape[0] else math.inf
        # arrivals happen in time order (ties in any order), so the next one is the n-th earliest
        return float(self.arrival_s[self._n_arrived]) if self._n_arrived < len(self.arrival_s) else math.inf

    def start(self, replicas: list[Replica]) -> None:
        self.replicas = replicas
        if len(replicas) > 1:
            self._replica_of = self.router.assign_all(len(self.arrival_s), len(replicas))
        if len(replicas) == 1 or self._replica_of is not None:  # no one reads a replica's state mid-run
            for replica in replicas:
                replica.sched.runs_past_finishes = replica.sched.can_run_past_finishes
        if self._replica_of is None:
            self.env.process(self._arrivals(np.arange(len(self.arrival_s)), None))
            return
        order = np.argsort(self._replica_of, kind="stable")
        bounds = np.searchsorted(self._replica_of[order], np.arange(len(replicas) + 1))
        own_rows = [order[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:])]  # per replica, in arrival order
        self._own = [self.arrival_s[rows] for rows in own_rows]
        self._own_next = [0] * len(replicas)
        for replica, rows in enumerate(own_rows):
            self.env.process(self._arrivals(rows, replica))

    def _arrivals(self, rows: np.ndarray, replica: int | None):
        """Add `rows` (in arrival order) as each arrives: to `replica`, or where the router picks."""
        env, n = self.env, len(self.arrival_s)
        for rid in rows.tolist():
            delay = self.arrival_s[rid] - env.now
            if delay > 0:
                yield env.timeout(delay)
            self._n_arrived += 1
            if replica is None:
                self.replicas[self.router.pick(rid, self.replicas, env.now)].add(rid)
            else:
                self._own_next[replica] += 1
                self.replicas[replica].add(rid)
            if self.progress is not None and self._n_arrived % 1000 == 0:
                self.progress(self._n_arrived, n)


class ClosedLoopSource:
    """Closed loop: `concurrency` clients; each sends its next request (in pool order) when its
    previous one ends (finished or rejected), after `think_time_s`."""

    reacts_to_completions = True

    def __init__(self, env: simpy.Environment, workload: ClosedLoop, table, router: Router,
                 progress: Callable[[int, int], None] | None = None, client_delay_s: float = 0.0):
        """`client_delay_s`: how much later than the engine's finish a client sees its response end
        (the serving front end, sim.engine.frontend); it sends its next request after that."""
        self.env, self.workload, self.table, self.router, self.progress = env, workload, table, router, progress
        self.client_delay_s = client_delay_s
        self.replicas: list[Replica] = []
        self._next = 0
        self._done_events: dict[int, simpy.Event] = {}
        self._pending_sends: list[float] = []
        self._think_rng = np.random.default_rng(workload.seed)

    def next_arrival_s(self, replica: int | None = None) -> float:
        """The next send of any client (whichever replica it goes to)."""
        return min(self._pending_sends) if self._pending_sends else math.inf

    def start(self, replicas: list[Replica]) -> None:
        self.replicas = replicas
        for replica in replicas:
            replica.sched.finished_listener = self._on_finished
        for _ in range(min(self.workload.concurrency, self.table.n_requests)):
            self.env.process(self._client())

    def _on_finished(self, rid: int) -> None:
        event = self._done_events.pop(rid, None)
        if event is not None:
            event.succeed()

    def _client(self):
        env, n = self.env, self.table.n_requests
        while self._next < n:
            rid = self._next
            self._next += 1
            self.table.arrival_s[rid] = env.now
            done = env.event()
            self._done_events[rid] = done
            self.replicas[self.router.pick(rid, self.replicas, env.now)].add(rid)
            if self.progress is not None and self._next % 1000 == 0:
                self.progress(self._next, n)
            yield done
            think_s = self.workload.think_times_s(self._think_rng) + self.client_delay_s
            if think_s > 0:
                send_s = env.now + think_s
                self._pending_sends.append(send_s)
                yield env.timeout(think_s)
                self._pending_sends.remove(send_s)
