"""A day spec (`kind: day` workload plus the fleet that serves it): pydantic models, loading.

```yaml
workload: {kind: day, duration_s: 86400, seed: 0, tenants: [{rate: {base: {kind: diurnal, ...}}, lengths: ...}]}
engine: {model: llama-3.1-8b, hardware: h100-sxm, engine: vllm}      # EngineConfig keys [engine: plan's, vllm]
fleet: {autoscaler: {policy: {kind: target, metric: queue_length, target: 4}}, failures: {...}, pricing: {...}}
slo: {ttft_s: 2.0, tpot_s: 0.1}
```
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, NonNegativeInt, PositiveFloat, PositiveInt, model_validator

from sim.fleet.daygen import DayWorkload
from sim.inputs.config import SLO
from sim.schema import Plausible, StrictModel

MAX_FLEET_REPLICAS = 10_000
# Shortest autoscaler decision interval: Kubernetes' HPA syncs every 15 s by default; below a
# second a day is millions of decisions (interval_s 1e-308 never ended).
MIN_AUTOSCALER_INTERVAL_S = 1.0
METRICS = ("queue_length", "kv_usage", "running", "request_rate")


class StaticPolicy(StrictModel):
    """A fixed count: the autoscaler only replaces failed replicas (as the pool allows)."""

    kind: Literal["static"]
    replicas: PositiveInt = Field(le=MAX_FLEET_REPLICAS)


class TargetTracking(StrictModel):
    """Keep `metric` per ready replica near `target`: at a decision, when the per-replica value is
    above target x scale_up_above or below target x scale_down_below, the wanted count is
    ceil(current x value / target). Metrics: queue_length (waiting requests), running (requests in
    the batch), kv_usage (share of KV blocks used, target in (0, 1]), request_rate (arrivals/s over
    the last interval)."""

    kind: Literal["target"]
    metric: Literal["queue_length", "kv_usage", "running", "request_rate"]
    target: PositiveFloat
    scale_up_above: float = Field(1.1, ge=1.0)
    scale_down_below: float = Field(0.7, gt=0, le=1.0)


class Predictive(StrictModel):
    """Scale ahead of the rate forecast: wanted = ceil(max forecast rate over the next
    lead_s + interval_s x (1 + margin) / rate_per_replica_rps); with `reactive`, the larger of
    that and the target-tracking count. The forecast is the spec's own expected rate (a perfect
    forecast of the mean, not of its noise); lead_s None: the cold start."""

    kind: Literal["predictive"]
    rate_per_replica_rps: PositiveFloat
    lead_s: Plausible("fleet_wait_s") | None = None
    margin: float = Field(0.1, ge=0, le=10)
    reactive: TargetTracking | None = None


Policy = Annotated[StaticPolicy | TargetTracking | Predictive, Field(discriminator="kind")]


class Autoscaler(StrictModel):
    policy: Policy
    interval_s: float = Field(30.0, ge=MIN_AUTOSCALER_INTERVAL_S)
    cooldown_up_s: Plausible("fleet_wait_s") = 60.0
    cooldown_down_s: Plausible("fleet_wait_s") = 300.0  # scale in only to the largest count wanted over this window
    min_replicas: PositiveInt = Field(1, le=MAX_FLEET_REPLICAS)
    max_replicas: PositiveInt = Field(64, le=MAX_FLEET_REPLICAS)
    headroom: NonNegativeInt = Field(0, le=MAX_FLEET_REPLICAS)  # N + k: k replicas above what the policy wants

    @model_validator(mode="after")
    def _bounds(self) -> Autoscaler:
        if self.min_replicas > self.max_replicas:
            raise ValueError("min_replicas must be <= max_replicas")
        if isinstance(self.policy, StaticPolicy) and self.policy.replicas > self.max_replicas:
            raise ValueError(f"policy.replicas: {self.policy.replicas} is above max_replicas ({self.max_replicas}); "
                             f"a static fleet would be cut to {self.max_replicas} without a word")
        return self


class ScheduledFailure(StrictModel):
    """Failure at `at_s` of `count` ready replicas (a node of 8 GPUs holds 8 / tp of them): the
    ones with the most requests, or from index `replica` on among the ready ones (launch order)."""

    at_s: Plausible("fleet_wait_s")
    replica: NonNegativeInt | None = None
    count: PositiveInt = Field(1, le=MAX_FLEET_REPLICAS)


class Failures(StrictModel):
    """Failures from the profile's per-GPU MTBF (`mtbf: true`; a replica of g GPUs fails at g /
    MTBF) and/or a schedule. A failed replica's running and queued requests are retried on
    another replica (from scratch, keeping their arrival time) or lost. Its GPUs stay out of the
    pool (`max_replicas`) for `repair_s` (None: the profile's facts)."""

    mtbf: bool = False
    schedule: list[ScheduledFailure] = []
    on_failure: Literal["retry", "lost"] = "retry"
    repair_s: Plausible("fleet_wait_s") | None = None


class Pricing(StrictModel):
    """`reserved_replicas` are paid all day at the reserved price (and never scaled below); the
    rest are on-demand, except a `spot_share` of launches beyond the reserved base, which run on
    spot at the spot price and are interrupted at the profile's spot rate (as failures)."""

    reserved_replicas: NonNegativeInt = Field(0, le=MAX_FLEET_REPLICAS)
    spot_share: float = Field(0.0, ge=0, le=1)


class FleetSpec(StrictModel):
    autoscaler: Autoscaler
    # ready at t = 0; None: the policy's own start (static: its count; predictive: the forecast's)
    initial_replicas: PositiveInt | None = Field(None, le=MAX_FLEET_REPLICAS)
    # round_robin: each replica plans up to its own next arrival (sim.fleet.source), the fastest
    router: Literal["round_robin", "least_outstanding", "least_kv", "random"] = "round_robin"
    failures: Failures = Failures()
    pricing: Pricing = Pricing()
    facts: dict | None = None  # overrides of sim/fleet/facts.yaml entries (same shape)

    @model_validator(mode="after")
    def _counts_within_the_pool(self) -> FleetSpec:
        """A fleet never holds more than `max_replicas`: a start or reserved base above it would be
        silently cut (or billed for replicas that never run)."""
        most = self.autoscaler.max_replicas
        for name, count in (("initial_replicas", self.initial_replicas),
                            ("pricing.reserved_replicas", self.pricing.reserved_replicas)):
            if count is not None and count > most:
                raise ValueError(f"{name}: {count} is above autoscaler.max_replicas ({most}); "
                                 f"raise max_replicas or ask for at most {most}")
        return self


class DaySpec(StrictModel):
    workload: DayWorkload
    engine: dict = Field(default_factory=dict)  # sim.inputs.config.EngineConfig keys
    fleet: FleetSpec
    slo: SLO = SLO(ttft_s=2.0)
    attainment_target: float = Field(0.99, gt=0, le=1)  # share of an hour's requests within the SLO
    per_minute: bool = False  # also tally each minute (summary.json `minutes`): a cold start's dip shows there


def load_day_spec(path: Path) -> DaySpec:
    """The spec, refused when its day carries no traffic at all (every rate 0 all day): there is
    nothing to replay, plan or bill, and no share of the day's requests to weigh tenants by."""
    from sim.errors import InputError
    from sim.fleet.daygen import DayGenerator
    from sim.fleet.facts import load_facts
    from sim.yamlio import read_mapping, validate

    spec = validate(DaySpec, read_mapping(path), path)
    load_facts(spec.fleet.facts, f"{path}: fleet.facts")  # its overrides' ranges, named in the user's file
    if DayGenerator(spec.workload, path.parent, str(path)).expected_requests() <= 0:
        raise InputError(path, "workload.tenants", "the day carries no traffic (every rate is 0 all day); "
                                                   "give a tenant a rate above 0")
    return spec
