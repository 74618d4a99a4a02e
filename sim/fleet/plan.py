"""Plan a day: the reserved base, the autoscaler's parameters and the headroom that meet the SLOs
every hour at least cost, verified by replaying the day (and again with a failure at the peak).

1. Capacity: the highest steady rate one replica serves with the day's length mix at the SLO
   attainment target (short static replays of `PROBE_S`, bisected).
2. Candidates, priced from the rate curve alone: a static fleet for the peak (all reserved), and
   predictive autoscaling (rate per replica = capacity x utilisation, a queue-length backstop) over
   every reserved base between the trough's and the peak's count, with headroom 0 or 1. Cost =
   reserved base all day + on-demand replica-hours above it (cold starts included).
3. Verification: replay the cheapest candidates in order of estimated cost until one meets the
   target in every hour; then replay it with a failure at the peak, raising the headroom (N+1, ...)
   until that replay meets the target too, or `MAX_HEADROOM` is reached (reported either way).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sim.fleet.day import engine_config, run_day
from sim.fleet.daygen import DayGenerator
from sim.fleet.facts import cold_start_parts_s, hardware_facts, load_facts
from sim.fleet.output import summarize
from sim.fleet.spec import DaySpec
from sim.output import write_json

PROBE_S = 300.0
BISECT_STEPS = 6
UTILISATIONS = (0.8, 0.9)
MAX_HEADROOM = 2
MAX_REPLAYS = 4
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

    def to_dict(self) -> dict:
        return {"capacity_rps_per_replica": self.capacity_rps, "probes": self.probes, "peak_rps": self.peak_rps,
                "trough_rps": self.trough_rps, "candidates": self.candidates, "verified": self.verified,
                "chosen": self.chosen, "with_failure_at_peak": self.with_failure,
                "failure_proof_headroom": self.failure_proof_headroom}

    def lines(self) -> list[str]:
        out = [f"one replica serves {self.capacity_rps:.2f} req/s at the SLO; the day's expected rate runs from "
               f"{self.trough_rps:.2f} to {self.peak_rps:.2f} req/s"]
        for run in self.verified + self.with_failure:
            out.append(f"  {run['name']}: estimated ${run['estimated_dollars_per_day']:,.0f}/day -> replayed "
                       f"${run['dollars_per_day']:,.0f}/day, {run['gpu_hours']:.1f} GPU-h, attainment "
                       f"{run['slo_attainment']:.4f}, worst hour {run['worst_hour_attainment']:.4f}, "
                       f"{run['hours_meeting_target']}/{run['n_hours']} hours at target, lost {run['n_lost']}")
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

    low, high = 0.0, 1.0
    while meets(high):
        low, high = high, 2 * high
    for _ in range(BISECT_STEPS):
        middle = (low + high) / 2
        low, high = (middle, high) if meets(middle) else (low, middle)
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


def _cold_start_s(spec: DaySpec, cfg, facts) -> float:
    from sim.model import load_model
    from sim.simulate import _replica_parts

    memory, cost = _replica_parts(cfg, load_model(cfg.model), cfg.hardware, None)
    return cold_start_parts_s(facts, cfg, memory.weight_bytes_per_gpu, cost.hw.host_link_bytes_s)["total_s"]


def spec_of(spec: DaySpec, candidate: dict, failure_at_s: float | None = None, headroom: int | None = None) -> DaySpec:
    """The day spec running `candidate` (with `headroom` instead of its own, and a failure at
    `failure_at_s` of the busiest ready replica). A static fleet's headroom is reserved too."""
    auto, reserved = dict(candidate["autoscaler"]), candidate["reserved_replicas"]
    if headroom is not None:
        auto["headroom"] = headroom
        if auto["policy"]["kind"] == "static":
            reserved = auto["min_replicas"] = auto["max_replicas"] = auto["policy"]["replicas"] + headroom
        else:
            auto["max_replicas"] = max(auto["max_replicas"], auto["min_replicas"] + headroom)
    failures = {"schedule": [] if failure_at_s is None else [{"at_s": failure_at_s}],
                "on_failure": spec.fleet.failures.on_failure, "repair_s": spec.fleet.failures.repair_s}
    fleet = spec.fleet.model_validate({**spec.fleet.model_dump(exclude={"autoscaler", "failures", "pricing"}),
                                       "autoscaler": auto, "failures": failures,
                                       "pricing": {"reserved_replicas": reserved}})
    return spec.model_copy(update={"fleet": fleet})


def _replay(spec: DaySpec, name: str, estimate: float, base_dir) -> dict:
    summary = summarize(run_day(spec, base_dir))
    keys = ("dollars_per_day", "gpu_hours", "slo_attainment", "worst_hour_attainment", "hours_meeting_target",
            "n_hours", "n_lost", "n_retried", "failures")
    return {"name": name, "estimated_dollars_per_day": estimate, **{k: summary[k] for k in keys}}


def plan_day(spec: DaySpec, base_dir: Path | None = None, probe_s: float = PROBE_S) -> DayPlan:
    capacity_rps, probes = replica_capacity_rps(spec, base_dir, probe_s)
    ranked, peak_rps, trough_rps = candidates(spec, capacity_rps, base_dir)
    plan = DayPlan(capacity_rps, probes, peak_rps, trough_rps, ranked)
    for candidate in ranked[:MAX_REPLAYS]:
        run = _replay(spec_of(spec, candidate), candidate["name"], candidate["estimated_dollars_per_day"], base_dir)
        plan.verified.append(run)
        if run["hours_meeting_target"] == run["n_hours"]:
            plan.chosen = candidate
            break
    if plan.chosen is None:
        return plan
    generator = DayGenerator(spec.workload, base_dir)
    t_s = np.arange(0.0, spec.workload.duration_s, 60.0)
    peak_s = float(t_s[int(np.argmax(generator.rate_rps(t_s)))])
    for headroom in range(plan.chosen["headroom"], MAX_HEADROOM + 1):
        name = f"{plan.chosen['name']}, failure at {peak_s / 3600:.1f} h, headroom {headroom}"
        run = _replay(spec_of(spec, plan.chosen, peak_s, headroom), name, plan.chosen["estimated_dollars_per_day"],
                      base_dir)
        plan.with_failure.append(run)
        if run["hours_meeting_target"] == run["n_hours"]:
            plan.failure_proof_headroom = headroom
            break
    return plan


def write_plan(plan: DayPlan, out_dir: Path) -> None:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "plan.json", plan.to_dict())
