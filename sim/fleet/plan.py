"""Plan a day: the reserved base, the autoscaler's parameters and the headroom that meet the SLOs
every hour at least cost, verified by replaying the day (and again with a failure at the peak).

1. Capacity: the highest steady rate one replica serves with the day's length mix at the SLO
   attainment target (short static replays of `PROBE_S`, bisected).
2. Candidates, priced from the rate curve alone: a static fleet for the peak (all reserved), and
   predictive autoscaling (rate per replica = capacity x utilisation, a queue-length backstop) over
   every reserved base between the trough's and the peak's count, with headroom 0 or 1. Cost =
   reserved base all day + on-demand replica-hours above it (cold starts included).
3. Screening (days of 6 h or more; `sim.fleet.screen`): the cheapest candidates, `SCREEN_BATCH`
   at a time, replayed on the day's peak and steepest-rise windows until a batch holds one that
   meets the target in every hour of them; then the first such candidate's headrooms (its own to
   `MAX_HEADROOM`) with a failure at the peak, on the window around it.
4. Verification on whole days: the cheapest candidate left (the screen's passers, else every one
   in order) replayed, and with screening at once the same day with a failure at the peak at the
   screened headroom; a candidate failing any hour gives way to the next; a failure replay
   failing raises the headroom (N+1, ...) up to `MAX_HEADROOM` (reported either way).

Replays run through `sim.fleet.replays.Replays` (here, or as Ray tasks); batches are fixed sizes,
so the plan is the same however many workers ran it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sim.fleet.day import engine_config, run_day
from sim.fleet.daygen import DayGenerator
from sim.fleet.facts import cold_start_parts_s, hardware_facts, load_facts
from sim.fleet.replays import Replays
from sim.fleet.screen import SCREEN_MIN_DAY_S, screen_windows
from sim.fleet.spec import DaySpec
from sim.fleet.verify import (
    MAX_HEADROOM,
    replay_row,
    row_args,
    screen_candidates,
    screen_failure,
    slim,
    verify_failure,
)
from sim.output import write_json

PROBE_S = 300.0
BISECT_STEPS = 6
FIRST_PROBE_RPS = 1.0  # the capacity search starts here, doubling while met, then bisects
MIN_PROBE_S = 1.0 / FIRST_PROBE_RPS  # a probe shorter than one gap at the first rate sees no request
UTILISATIONS = (0.8, 0.9)
MAX_REPLAYS = 4  # whole-day replays of candidates without a failure
QUEUE_BACKSTOP_PER_REPLICA = 8.0  # judgement: a queue this deep per replica means the forecast was low


@dataclass
class DayPlan:
    capacity_rps: float
    probes: list[dict]
    peak_rps: float
    trough_rps: float
    candidates: list[dict]
    verified: list[dict] = field(default_factory=list)
    chosen: dict | None = None
    with_failure: list[dict] = field(default_factory=list)
    failure_proof_headroom: int | None = None  # the least headroom whose replay with a peak failure met the target
    windows: list[dict] = field(default_factory=list)  # the screen's windows (none: not screened)
    screened: list[dict] = field(default_factory=list)  # per candidate screened: its windows' hours, passed
    screened_failure: list[dict] = field(default_factory=list)  # per headroom: the failure window, passed
    wall_time_s: float | None = None  # reported only

    def to_dict(self) -> dict:
        return {"capacity_rps_per_replica": self.capacity_rps, "probes": self.probes, "peak_rps": self.peak_rps,
                "trough_rps": self.trough_rps, "candidates": self.candidates, "screen_windows": self.windows,
                "screened": self.screened, "screened_failure_at_peak": self.screened_failure,
                "verified": self.verified, "chosen": self.chosen, "with_failure_at_peak": self.with_failure,
                "failure_proof_headroom": self.failure_proof_headroom, "wall_time_s": self.wall_time_s}

    def lines(self) -> list[str]:
        out = [f"one replica serves {self.capacity_rps:.2f} req/s at the SLO; the day's expected rate runs from "
               f"{self.trough_rps:.2f} to {self.peak_rps:.2f} req/s"]
        if self.windows:
            out.append("screened on " + ", ".join(w["label"] for w in self.windows) + ":")
        for row in self.screened + self.screened_failure:
            worst = min((h["slo_attainment"] for h in row["hours"] if h["slo_attainment"] is not None), default=None)
            out.append(f"  {row['name']}: estimated ${row['estimated_dollars_per_day']:,.0f}/day, worst hour "
                       f"{'-' if worst is None else f'{worst:.4f}'}, {'passed' if row['passed'] else 'failed'}")
        out.append("replayed whole days:")
        for run in self.verified + self.with_failure:
            out.append(f"  {run['name']}: estimated ${run['estimated_dollars_per_day']:,.0f}/day -> replayed "
                       f"${run['dollars_per_day']:,.0f}/day, {run['gpu_hours']:.1f} GPU-h, attainment "
                       f"{run['slo_attainment']:.4f}, worst hour {run['worst_hour_attainment']:.4f}, "
                       f"{run['hours_meeting_target']}/{run['n_hours']} hours at target, lost {run['n_lost']}; "
                       f"{run['wall_time_s']:.0f} s, worker peak RSS {run['worker']['peak_rss_mib']:.0f} MiB")
        out.append(f"chosen: {self.chosen['name'] if self.chosen else 'none met the target'}")
        if self.chosen is not None:
            proof = self.failure_proof_headroom
            out.append("with a failure at the peak: " + (f"headroom N+{proof} keeps every hour at the target"
                                                         if proof is not None else
                                                         f"no headroom up to N+{MAX_HEADROOM} kept every hour there"))
        return out


def _probe_spec(spec: DaySpec, rate_rps: float, probe_s: float = PROBE_S) -> DaySpec:
    """One static replica under a steady `rate_rps` of the day's length mix (tenants weighted by
    their share of the day's requests)."""
    generator = DayGenerator(spec.workload)
    shares = np.array([r.mean_rate_rps(0.0, spec.workload.duration_s) for r in generator.rates])
    shares = shares / shares.sum()
    tenants = [t.model_copy(update={"rate": t.rate.model_validate(
        {"base": {"kind": "constant", "rate_rps": max(rate_rps * share, 1e-6)}})}) for t, share in
        zip(spec.workload.tenants, shares)]
    workload = spec.workload.model_copy(update={"duration_s": probe_s, "tenants": tenants, "chunk_s": probe_s})
    fleet = spec.fleet.model_copy(update={
        "autoscaler": spec.fleet.autoscaler.model_validate({"policy": {"kind": "static", "replicas": 1},
                                                            "max_replicas": 1, "interval_s": 60}),
        "initial_replicas": 1, "failures": spec.fleet.failures.model_validate({}),
        "pricing": spec.fleet.pricing.model_validate({})})
    return spec.model_copy(update={"workload": workload, "fleet": fleet})


def replica_capacity_rps(spec: DaySpec, base_dir: Path | None = None,
                         probe_s: float = PROBE_S) -> tuple[float, list[dict]]:
    """The highest probed steady rate one replica serves at the attainment target (bisection)."""
    probes: list[dict] = []

    def meets(rate_rps: float) -> bool:
        totals = run_day(_probe_spec(spec, rate_rps, probe_s), base_dir).tally.totals()
        probes.append({"rate_rps": rate_rps, "slo_attainment": totals["slo_attainment"]})
        return (totals["slo_attainment"] or 0.0) >= spec.attainment_target

    low, high = 0.0, FIRST_PROBE_RPS
    while meets(high):
        low, high = high, 2 * high
    for _ in range(BISECT_STEPS):
        middle = (low + high) / 2
        low, high = (middle, high) if meets(middle) else (low, middle)
    if low <= 0:
        from sim.errors import InputError

        raise InputError("--probe-s", None, f"one replica met the attainment target ({spec.attainment_target:g}) at "
                                            f"no probed rate down to {high:.3g} req/s over {probe_s:g} s probes: "
                                            "a longer --probe-s, or an SLO / attainment_target the replica can meet")
    return low, probes


def _candidate(name: str, spec: DaySpec, reserved: int, policy: dict, headroom: int, estimate: float,
               max_replicas: int) -> dict:
    auto = {"policy": policy, "interval_s": 30, "cooldown_up_s": 30, "cooldown_down_s": 600,
            "min_replicas": max(reserved, 1), "max_replicas": max_replicas, "headroom": headroom}
    return {"name": name, "reserved_replicas": reserved, "headroom": headroom, "autoscaler": auto,
            "estimated_dollars_per_day": estimate}


def candidates(spec: DaySpec, capacity_rps: float, base_dir: Path | None = None) -> tuple[list[dict], float, float]:
    """Every candidate with its estimated $ per day, cheapest first; and the day's peak and trough."""
    cfg = engine_config(spec)
    facts = load_facts(spec.fleet.facts)
    prices = hardware_facts(facts, cfg).price_per_gpu_h
    generator = DayGenerator(spec.workload, base_dir)
    t_s = np.arange(0.0, spec.workload.duration_s, 60.0)
    rate = generator.rate_rps(t_s)
    days = spec.workload.duration_s / 86_400.0
    gpus = cfg.tp
    cold_h = _cold_start_s(spec, cfg, facts) / 3600.0
    peak_n = max(math.ceil(rate.max() / capacity_rps), 1)
    out = []
    for headroom in range(MAX_HEADROOM + 1):
        static_cost = (peak_n + headroom) * gpus * 24 * prices.reserved
        out.append(_candidate(f"static {peak_n}+{headroom}", spec, peak_n + headroom,
                              {"kind": "static", "replicas": peak_n}, headroom, static_cost, peak_n + headroom))
    for utilisation in UTILISATIONS:
        per_replica = capacity_rps * utilisation
        wanted = np.maximum(np.ceil(rate * 1.1 / per_replica), 1)
        for headroom in (0, 1):
            need = wanted + headroom
            for reserved in range(int(need.min()), int(need.max()) + 1):
                above = np.maximum(need - reserved, 0)
                launches = np.maximum(np.diff(above), 0).sum()
                cost = reserved * gpus * 24 * prices.reserved + (
                    (above.sum() * 60.0 / 3600.0 / days + launches * cold_h / days) * gpus * prices.on_demand)
                policy = {"kind": "predictive", "rate_per_replica_rps": round(per_replica, 4), "margin": 0.1,
                          "reactive": {"kind": "target", "metric": "queue_length",
                                       "target": QUEUE_BACKSTOP_PER_REPLICA}}
                out.append(_candidate(f"predictive u={utilisation} base {reserved} +{headroom}", spec, reserved,
                                      policy, headroom, cost, int(need.max()) + MAX_HEADROOM))
    out.sort(key=lambda c: c["estimated_dollars_per_day"])
    return out, float(rate.max()), float(rate.min())


def _check_fleet_size(peak_rps: float, capacity_rps: float) -> None:
    """The candidates span every reserved base up to the peak's count, each a fleet the spec schema
    must hold (MAX_FLEET_REPLICAS): counted before one is built, so a peak a replica serves only a
    millionth of is one line, not millions of candidates."""
    from sim.errors import InputError
    from sim.fleet.spec import MAX_FLEET_REPLICAS

    most = math.ceil(peak_rps * 1.1 / (capacity_rps * min(UTILISATIONS))) + MAX_HEADROOM
    if most > MAX_FLEET_REPLICAS:
        raise InputError("workload", None, f"the day's peak of {peak_rps:,.4g} req/s needs up to {most:,} replicas "
                                           f"of {capacity_rps:.4g} req/s each, above the fleet limit of "
                                           f"{MAX_FLEET_REPLICAS:,}; plan a lighter day or a faster replica")


def _cold_start_s(spec: DaySpec, cfg, facts) -> float:
    from sim.inputs.model import load_model
    from sim.run.simulate import _replica_parts

    memory, cost = _replica_parts(cfg, load_model(cfg.model), cfg.hardware, None)
    return cold_start_parts_s(facts, cfg, memory.weight_bytes_per_gpu, cost.hw.host_link_bytes_s)["total_s"]


def peak_time_s(spec: DaySpec, base_dir=None) -> float:
    generator = DayGenerator(spec.workload, base_dir)
    t_s = np.arange(0.0, spec.workload.duration_s, 60.0)
    return float(t_s[int(np.argmax(generator.rate_rps(t_s)))])


def plan_day(spec: DaySpec, base_dir: Path | None = None, probe_s: float = PROBE_S, replays: Replays | None = None,
             screen: bool | None = None) -> DayPlan:
    """Probe, price, screen (`screen` None: days of SCREEN_MIN_DAY_S or more), verify (module docstring)."""
    wall_start_s = time.perf_counter()  # reported only
    replays = replays or Replays()
    screened = spec.workload.duration_s >= SCREEN_MIN_DAY_S if screen is None else screen
    windows = screen_windows(spec, DayGenerator(spec.workload, base_dir)) if screened else []
    if screened and not windows:
        from sim.errors import InputError

        raise InputError("--screen", None, f"needs a day of at least {SCREEN_MIN_DAY_S / 3600:g} h; "
                                           f"this one is {spec.workload.duration_s / 3600:g} h")
    capacity_rps, probes = replica_capacity_rps(spec, base_dir, probe_s)
    t_s = np.arange(0.0, spec.workload.duration_s, 60.0)
    _check_fleet_size(float(DayGenerator(spec.workload, base_dir).rate_rps(t_s).max()), capacity_rps)
    if replays.progress is not None:
        replays.progress(f"one replica serves {capacity_rps:.3f} req/s at the SLO ({len(probes)} probes of "
                         f"{probe_s:g} s, {time.perf_counter() - wall_start_s:.0f} s)")
    ranked, peak_rps, trough_rps = candidates(spec, capacity_rps, base_dir)
    plan = DayPlan(capacity_rps, probes, peak_rps, trough_rps, ranked)
    peak_s = peak_time_s(spec, base_dir)
    plan.windows = [w.to_dict() for w in windows]
    order = screen_candidates(plan, spec, base_dir, replays, windows) if windows else ranked
    for candidate in order[:MAX_REPLAYS]:
        headroom = screen_failure(plan, spec, base_dir, replays, candidate, peak_s) if windows else None
        tasks = [row_args(spec, candidate, base_dir)]
        if headroom is not None:  # the screened headroom's failure day alongside
            tasks.append(row_args(spec, candidate, base_dir, peak_s, headroom))
        runs = replays.map(replay_row, tasks, f"whole day of {candidate['name']}" + (
            f", and with a failure at the peak, headroom {headroom}" if headroom is not None else ""))
        plan.verified.append(slim(runs[0]))
        if runs[0]["hours_meeting_target"] == runs[0]["n_hours"]:
            plan.chosen = candidate
            verify_failure(plan, spec, base_dir, replays, peak_s, [slim(r) for r in runs[1:]], headroom)
            break
    plan.wall_time_s = time.perf_counter() - wall_start_s
    return plan


DAY_PLAN_FILES = ("plan.json",)


def write_plan(plan: DayPlan, out_dir: Path) -> None:
    """plan.json in a folder replaced whole (sim.run.folder.atomic_run_dir): a failure or a kill
    leaves an earlier plan, or nothing, never a mix."""
    from sim.run.folder import atomic_run_dir

    with atomic_run_dir(out_dir, DAY_PLAN_FILES) as tmp:
        write_json(tmp / "plan.json", plan.to_dict())
