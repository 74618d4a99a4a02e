"""Replay a day through an autoscaled, failing fleet: `run_day(spec) -> DayResult`.

Processes (SimPy): the day's arrivals (sim.fleet.source), the autoscaler deciding every
`interval_s` (which also records the timeline), scheduled failures, and per replica an MTBF (and,
on spot, an interruption) draw from the fleet's own generator. The run ends when the day is over
and every request has ended; billing covers [0, duration_s].
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import simpy

from sim.errors import InputError
from sim.fleet.cluster import DRAINING, READY, STARTING, Fleet, FleetReplica, exponential_s
from sim.fleet.daygen import DayGenerator
from sim.fleet.facts import cold_start_parts_s, hardware_facts, load_facts
from sim.fleet.policy import initial_replicas, wanted_replicas
from sim.fleet.source import DaySource
from sim.fleet.spec import DaySpec, Predictive
from sim.fleet.table import SlotTable
from sim.fleet.tally import Tally
from sim.inputs.config import EngineConfig
from sim.inputs.model import load_model

TIMELINE = ("t_s", "ready", "starting", "draining", "in_repair", "queue_length", "running", "kv_usage",
            "arrival_rps", "wanted")


@dataclass
class DayResult:
    spec: DaySpec
    cfg: EngineConfig
    tally: Tally
    timeline: dict[str, list]
    replicas: list[FleetReplica]
    cold_start: dict
    gpus_per_replica: int
    sim_end_s: float
    wall_time_s: float
    n_failures: int
    peak_in_flight: int  # the most requests in the slot table at once (arrived, not yet tallied)
    table_rows: int  # the slot table's size at the end: what per-request memory the day needed
    minute_tally: Tally | None = None


def engine_config(spec: DaySpec, where: str = "engine") -> EngineConfig:
    """The day's replica config: the spec's `engine:` keys, with `plan`'s engine preset when they name none
    (sim/inputs/engines/default.py; `engine: none` for the generic engine), so `day` and `day plan` price
    the engine `plan` prices."""
    from sim.inputs.engines.default import with_default_engine
    from sim.yamlio import validate

    data = with_default_engine(dict(spec.engine))
    if data.get("engine") and "policy" not in data:
        from sim.inputs.engines.preset import load_engine

        if load_engine(str(data["engine"])).scheduling.policy == "radix":
            # a day's generated requests carry no prefix ids, so the engine's prefix cache (vLLM V1's is on
            # by default) finds no hits: the same schedule as chunked prefill, which a day replays
            data["policy"] = "chunked"
    cfg = validate(EngineConfig, data, where)
    refused = [(cfg.is_disaggregated, "disaggregated prefill/decode"), (cfg.reads_prefix_ids(), "radix / prefix ids"),
               (bool(cfg.spec_tokens), "speculative decoding"), (cfg.record_steps, "record_steps"),
               (cfg.replica_hardware is not None, "replica_hardware")]
    for is_on, what in refused:
        if is_on:
            raise InputError(where, what, "not modelled in a day replay (sim/fleet); leave it off")
    return cfg  # latency attribution is never attached: a day keeps per-hour tallies, not per-request rows


def run_day(spec: DaySpec, base_dir: Path | None = None, progress=None, offset_s: float = 0.0) -> DayResult:
    """Replay `spec`'s day; `offset_s` (a whole number of chunks): replay instead the window of
    `spec.workload.duration_s` starting at that time of the day (its arrivals, forecast and failure
    draws; the fleet starts as the policy wants it then, with nothing queued), times relative to it."""
    from sim.run.simulate import _replica_parts

    wall_start_s = time.perf_counter()  # reported only
    cfg = engine_config(spec)
    generator = DayGenerator(spec.workload, base_dir, "workload", offset_s)
    facts = load_facts(spec.fleet.facts)
    hw_facts = hardware_facts(facts, cfg)
    model = load_model(cfg.model)
    max_model_len = cfg.max_model_len or model.max_position_embeddings
    memory, cost = _replica_parts(cfg, model, cfg.hardware, None)
    cold = cold_start_parts_s(facts, cfg, memory.weight_bytes_per_gpu, cost.hw.host_link_bytes_s)
    env = simpy.Environment()
    table, tally = SlotTable(max_model_len), Tally(spec.workload.duration_s, spec.slo)
    source = DaySource(env, generator, table, tally)
    if spec.per_minute:
        source.minute_tally = Tally(spec.workload.duration_s, spec.slo, 60.0)
    failures = spec.fleet.failures
    repair_s = hw_facts.repair_s if failures.repair_s is None else failures.repair_s
    fleet = Fleet(env, cfg, table, tally, source, memory, cost, max_model_len, cold["total_s"], failures.on_failure,
                  repair_s, np.random.default_rng([cfg.seed, 27]), cfg.tp, spec.fleet.router)
    source.fleet, fleet.day_end_s = fleet, spec.workload.duration_s
    controller = Controller(env, spec, fleet, source, generator, cold["total_s"])
    if failures.mtbf or spec.fleet.pricing.spot_share > 0:
        fleet.failure_listeners.append(lambda fr: _draw_failures(env, fleet, fr, hw_facts, failures.mtbf))
    controller.start()
    env.process(source.arrivals())
    env.process(controller.loop(progress))
    for failure in failures.schedule:
        if failure.at_s >= spec.workload.duration_s:
            raise InputError("fleet.failures.schedule", "at_s",
                             f"must be within the day (< {spec.workload.duration_s:g} s)")
        source.add_event(failure.at_s)
        env.process(_scheduled_failure(env, fleet, failure))
    env.run()
    return DayResult(spec, cfg, tally, controller.timeline, fleet.replicas, cold, cfg.tp, float(env.now),
                     time.perf_counter() - wall_start_s, fleet.n_failures, table.peak_in_flight,
                     table.n_requests, source.minute_tally)


class Controller:
    """The autoscaler: every interval_s, read the fleet, want a count, launch or scale in."""

    def __init__(self, env, spec: DaySpec, fleet: Fleet, source: DaySource, generator: DayGenerator,
                 cold_start_s: float):
        self.env, self.spec, self.fleet, self.source, self.generator = env, spec, fleet, source, generator
        self.auto, self.pricing = spec.fleet.autoscaler, spec.fleet.pricing
        policy = self.auto.policy
        self.lead_s = (policy.lead_s if isinstance(policy, Predictive) and policy.lead_s is not None
                       else cold_start_s)
        self.min_replicas = max(self.auto.min_replicas, self.pricing.reserved_replicas)
        self.timeline: dict[str, list] = {name: [] for name in TIMELINE}
        self._last_up_s = -math.inf
        self._recent: deque[tuple[float, int]] = deque()  # (time, wanted) over the last cooldown_down_s
        self._arrived_at_last = 0
        self._n_beyond_reserved = 0

    def _clamp(self, wanted: int) -> int:
        return min(max(wanted + self.auto.headroom, self.min_replicas), self.auto.max_replicas)

    def start(self) -> None:
        n = self.spec.fleet.initial_replicas
        if n is None:
            n = self._clamp(initial_replicas(self.auto.policy, self.generator.rate_rps, self.lead_s,
                                             self.auto.interval_s))
        for _ in range(min(n, self.auto.max_replicas)):
            self.fleet.launch(self._next_kind(), ready_now=True)
        self._recent.append((0.0, n))  # the starting count holds for the first scale-in window

    def _next_kind(self) -> str:
        n_reserved = len([r for r in self.fleet.live(STARTING, READY, DRAINING) if r.kind == "reserved"])
        if n_reserved < self.pricing.reserved_replicas:
            return "reserved"
        self._n_beyond_reserved += 1
        share = self.pricing.spot_share
        n = self._n_beyond_reserved  # every launch beyond the base where the spot count's share ticks up
        spot = share > 0 and math.floor(n * share) > math.floor((n - 1) * share)
        return "spot" if spot else "on_demand"

    def loop(self, progress):
        env, fleet, auto = self.env, self.fleet, self.auto
        end_s = self.spec.workload.duration_s
        while True:
            self.decide()
            if progress is not None:
                progress(min(env.now, end_s), end_s)
            if env.now >= end_s and self.source.arrivals_done and self.source.n_open == 0:
                return
            self.source.add_event(env.now + auto.interval_s)
            yield env.timeout(auto.interval_s)
            if not fleet.ready and not fleet.live(STARTING) and self.source.arrivals_done and self.source.n_open == 0:
                return

    def decide(self) -> None:
        env, fleet, auto = self.env, self.fleet, self.auto
        metrics = fleet.metrics()
        metrics["request_rate"] = (self.source.n_arrived - self._arrived_at_last) / auto.interval_s
        self._arrived_at_last = self.source.n_arrived
        ready, starting = fleet.live(READY), fleet.live(STARTING)
        n_current = len(ready) + len(starting)
        wanted = self._clamp(wanted_replicas(auto.policy, metrics, len(ready), n_current, self.generator.rate_rps,
                                             env.now, self.lead_s, auto.interval_s))
        self._recent.append((env.now, wanted))
        while self._recent[0][0] < env.now - auto.cooldown_down_s:
            self._recent.popleft()
        settled = max(w for _, w in self._recent)  # scale in only to the most wanted of the window
        pool_left = auto.max_replicas - n_current - len(fleet.live(DRAINING)) - fleet.n_in_repair()
        if wanted > n_current and env.now - self._last_up_s >= auto.cooldown_up_s and pool_left > 0:
            for _ in range(min(wanted - n_current, pool_left)):
                fleet.launch(self._next_kind())
            self._last_up_s = env.now
        elif settled < n_current:
            # newest first, never below the reserved base: starting ones are cancelled before ready ones drain
            order = sorted(starting, key=lambda r: -r.index) + sorted(ready, key=lambda r: -r.index)
            n_reserved = sum(r.kind == "reserved" for r in order)
            for fr in order[: n_current - settled]:
                if fr.kind == "reserved" and n_reserved <= self.pricing.reserved_replicas:
                    continue
                n_reserved -= fr.kind == "reserved"
                fleet.cancel_or_drain(fr)
        self._record(metrics, wanted)

    def _record(self, metrics: dict, wanted: int) -> None:
        fleet = self.fleet
        row = (self.env.now, len(fleet.live(READY)), len(fleet.live(STARTING)), len(fleet.live(DRAINING)),
               fleet.n_in_repair(), metrics["queue_length"], metrics["running"], metrics["kv_usage"],
               metrics["request_rate"], wanted)
        for name, value in zip(TIMELINE, row):
            self.timeline[name].append(value)


def _scheduled_failure(env, fleet: Fleet, failure):
    yield env.timeout(failure.at_s - env.now)
    ready = fleet.live(READY)
    if failure.replica is None:
        victims = sorted(ready, key=lambda r: (-r.replica.sched.n_outstanding(), r.index))[: failure.count]
    else:
        victims = ready[failure.replica: failure.replica + failure.count]
    for victim in victims:
        fleet.fail(victim)


def _draw_failures(env, fleet: Fleet, fr: FleetReplica, hw_facts, mtbf: bool) -> None:
    """Time-to-failure draws for a replica that just became ready: its GPUs' MTBF (when on) and,
    on spot, the interruption rate; the earlier one fails it if it is still running then."""
    rate_per_h = (fleet.gpus_per_replica / hw_facts.gpu_mtbf_h if mtbf else 0.0) + (
        hw_facts.spot_interruptions_per_h if fr.kind == "spot" else 0.0)
    after_s = exponential_s(fleet.rng, rate_per_h)
    if env.now + after_s < fleet.day_end_s:  # one beyond the day would only keep the clock running
        fleet.source.add_event(env.now + after_s)
        env.process(_fail_later(env, fleet, fr, after_s))


def _fail_later(env, fleet: Fleet, fr: FleetReplica, after_s: float):
    yield env.timeout(after_s)
    if fr.state in (READY, DRAINING):
        fleet.fail(fr)
