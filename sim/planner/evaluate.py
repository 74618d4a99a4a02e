"""One point of a rate search: replay the workload slice at a given arrival rate, judge it against the SLOs."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import numpy as np
import pandas as pd

from sim.inputs.config import EngineConfig
from sim.inputs.slo import percentile_or_none
from sim.planner.burst import SearchSlice
from sim.planner.energy import run_energy
from sim.planner.slo import PlanSLO
from sim.run.percentile_bound import (
    CONFIDENCE,
    close_call_growth,
    percentile_upper_bound,
    stretches_for,
)
from sim.run.simulate import simulate
from sim.run.steady_state import (
    MEASURED_LIFETIMES,
    SteadyState,
    confirm_lifetimes,
    steady_state,
    warmup_requests,
    within_budget,
)
from sim.run.summary import requests_frame

MAX_STEADY_REQUESTS = 60_000  # the longest run a rate point may take to reach steady state; past it: fails
KV_REJECT_MARK = "KV blocks"  # the scheduler's reason for a request larger than the whole KV cache
PLOT_KEYS = ("ttft_p99", "tpot_p99", "e2e_p99")  # always recorded, for the latency-vs-rate plots


@dataclass(frozen=True)
class RatePoint:
    """What one run at `rate_qps` showed. `values_s`: percentile per SLO key (None when no
    request yielded the metric); `ratios`: value / limit per SLO key (inf when None)."""

    rate_qps: float
    values_s: dict[str, float | None]
    ratios: dict[str, float]  # upper bound (or value, when no bound) / limit per SLO key
    goodput: float
    n_measured: int
    n_rejected_kv: int
    passes: bool
    output_tok_s: float = 0.0  # output tokens per second the replica serves at this rate (steady state)
    tok_s_per_user: float | None = None  # 1 / mean TPOT of the finished measured requests
    first_reject_reason: str | None = None  # why the first measured request that was rejected was
    steady: dict | None = None  # sim.run.steady_state.SteadyState.to_dict() of the run judged, + n_requests
    slo_passes: bool | None = None  # the SLO verdict on the run's own percentiles (passes also needs a
    # steady, kept-up run and every percentile's upper confidence bound within its limit)
    upper_s: dict[str, float | None] | None = None  # per SLO key: sim.run.percentile_bound's upper bound
    energy: dict | None = None  # sim.planner.energy.run_energy of the run (None: not metered)

    def to_dict(self) -> dict:
        """The plan.json search point; `energy` only where the run was metered (older plans' keys kept)."""
        fields = asdict(self)
        if fields["energy"] is None:
            del fields["energy"]
        return fields


def evaluate_rate(cfg: EngineConfig, piece: SearchSlice, rate_qps: float, slo: PlanSLO,
                  time_scale: dict[str, float] | None = None,
                  required_lifetimes: float = MEASURED_LIFETIMES) -> RatePoint:
    """Simulate the slice re-timed for a workload mean of `rate_qps` on one replica of `cfg`; its
    first `n_warmup` requests (in arrival order) warm the replica up and are not measured.
    A point passes only on a run that reached steady state and kept up (sim.run.steady_state): a run
    that meets the SLOs but is too short to tell is run again on a longer slice (busiest, or the
    workload tiled) of the length its own lifetimes call for, up to MAX_STEADY_REQUESTS requests.
    A point whose percentiles meet the limits on a steady run but whose upper confidence bounds do not
    (a close call: sim.run.percentile_bound) runs once more on a slice long enough to tell, when that is
    at most CLOSE_CALL_MAX_GROWTH times longer; otherwise, or if the bound still straddles, it fails.
    Deterministic for a given cfg.seed. Latency attribution is off: the verdict needs only latencies.
    `time_scale`: a perturbed cost model (planner.band). `required_lifetimes`: the judged request
    lifetimes a run needs (more for `confirm_rate`; fewer where that many would exceed the
    confirmation's request budget: sim.run.steady_state.within_budget)."""
    cfg = cfg.model_copy(update={"latency_attribution": False})
    close_calls_left = 1
    while True:
        result = simulate(cfg, piece.at_rate(rate_qps), time_scale=time_scale)
        frame = requests_frame(result)
        steady = steady_state(frame, piece.n_warmup, required_lifetimes)
        if within_budget(required_lifetimes, steady) < required_lifetimes:
            required_lifetimes = within_budget(required_lifetimes, steady)
            steady = steady_state(frame, piece.n_warmup, required_lifetimes)
        point = replace(judge(frame.iloc[piece.n_warmup:], rate_qps, slo, steady, len(frame)),
                        energy=run_energy(result, frame))
        longer = _longer_slice(piece, steady, point)
        if longer is None and close_calls_left:
            longer, close_calls_left = _close_call_slice(piece, steady, point, slo), 0
        if longer is None:
            return point
        piece = longer


def confirm_rate(cfg: EngineConfig, piece: SearchSlice, rate_qps: float, slo: PlanSLO,
                 time_scale: dict[str, float] | None = None) -> RatePoint:
    """The verdict a capacity is claimed on: `evaluate_rate` on a run of the judged request lifetimes
    its SLO percentiles ask for (sim.run.steady_state.confirm_lifetimes: why four are not enough near
    the limit, and a P99 asks for a hundred, within a budget of requests)."""
    required = confirm_lifetimes(s.percentile for s in slo.limits)
    return evaluate_rate(cfg, piece, rate_qps, slo, time_scale, required)


def _longer_slice(piece: SearchSlice, steady: SteadyState, point: RatePoint) -> SearchSlice | None:
    """The slice to run again on (None: this point is decided): only a point that met the SLOs on a run
    too short to tell, and only while the needed length grows and stays under MAX_STEADY_REQUESTS."""
    if not point.slo_passes or not steady.kept_up or steady.long_enough or steady.needed_requests is None:
        # kept_up is False on a short run only when the queue visibly grew: decided
        return None
    arrival_s = piece.at_rate(point.rate_qps).arrival_s
    rate_qps = (len(arrival_s) - 1) / float(arrival_s[-1] - arrival_s[0])
    warmup = warmup_requests(rate_qps, steady.lifetime_s)
    wanted = max(steady.needed_requests, len(piece.trace) + 1)
    if wanted > MAX_STEADY_REQUESTS:
        return None
    return piece.longer(wanted, warmup)


def _close_call_slice(piece: SearchSlice, steady: SteadyState, point: RatePoint,
                      slo: PlanSLO) -> SearchSlice | None:
    """A slice long enough to decide a close call (sim.run.percentile_bound.close_call_growth), or None:
    not a close call, or too long to decide (then the point fails)."""
    if point.passes or not point.slo_passes or not (steady.long_enough and steady.kept_up) or not point.upper_s:
        return None
    growth = close_call_growth([(point.values_s[s.key], point.upper_s[s.key], s.limit_s) for s in slo.limits])
    wanted = None if growth is None else math.ceil(len(piece.trace) * growth)
    if wanted is None or wanted > MAX_STEADY_REQUESTS:
        return None
    arrival_s = piece.at_rate(point.rate_qps).arrival_s
    rate_qps = (len(arrival_s) - 1) / float(arrival_s[-1] - arrival_s[0])
    return piece.longer(wanted, warmup_requests(rate_qps, steady.lifetime_s))


def judge(measured: pd.DataFrame, rate_qps: float, slo: PlanSLO, steady: SteadyState | None = None,
          n_run: int | None = None) -> RatePoint:
    """The SLO verdict on a requests frame (see sim.planner.slo for the definition); with `steady` (the
    run's steady-state reading, `n_run` requests in all), it passes only where the run was long enough
    and kept up, and every percentile's upper confidence bound (sim.run.percentile_bound, one stretch
    per request lifetime judged) is within its limit."""
    finished = measured[measured["status"] == "FINISHED"]
    wanted = {s.key: (s.column, s.percentile) for s in slo.limits}
    wanted.update({key: (key.split("_p")[0] + "_s", int(key.split("_p")[1])) for key in PLOT_KEYS})
    values = {key: _percentile(finished[column].to_numpy(), q) for key, (column, q) in wanted.items()}
    upper = None if steady is None else {
        s.key: percentile_upper_bound(finished[s.column].to_numpy(), s.percentile,
                                      stretches_for(steady.measured_lifetimes)) for s in slo.limits}
    judged = values if upper is None else upper
    ratios = {s.key: math.inf if judged[s.key] is None else judged[s.key] / s.limit_s for s in slo.limits}
    n_measured = len(measured)
    goodput = len(finished) / n_measured if n_measured else 0.0
    rejected = measured.loc[measured["status"] == "REJECTED", "reject_reason"]
    n_rejected_kv = int(sum(KV_REJECT_MARK in str(reason) for reason in rejected))
    slo_passes = goodput >= slo.goodput_min and all(
        values[s.key] is not None and values[s.key] <= s.limit_s for s in slo.limits)
    passes = (slo_passes and all(r <= 1.0 for r in ratios.values())
              and (steady is None or (steady.long_enough and steady.kept_up)))
    output_tok_s, tok_s_per_user = _speeds(finished, rate_qps, goodput)
    first_reason = str(rejected.iloc[0]) if len(rejected) else None
    steady_dict = None if steady is None else {**steady.to_dict(), "n_requests": n_run, "verdict": steady.verdict()}
    return RatePoint(rate_qps, values, ratios, goodput, n_measured, n_rejected_kv, passes, output_tok_s,
                     tok_s_per_user, first_reason, steady_dict, slo_passes, upper)


def _speeds(finished: pd.DataFrame, rate_qps: float, goodput: float) -> tuple[float, float | None]:
    """(output tok/s the replica serves in steady state, 1 / mean TPOT) at this rate."""
    output_tok_s = 0.0
    if len(finished) and "output_tokens" in finished:
        output_tok_s = rate_qps * float(finished["output_tokens"].mean()) * goodput
    tpot_s = finished["tpot_s"].dropna() if "tpot_s" in finished else pd.Series([], dtype=float)
    return output_tok_s, (1.0 / float(tpot_s.mean()) if len(tpot_s) and tpot_s.mean() > 0 else None)


def _percentile(values: np.ndarray, q: int) -> float | None:
    return percentile_or_none(values, q)


def binding_constraint(point: RatePoint, slo: PlanSLO) -> str:
    """What fails first at a failing point: 'kv_capacity' (requests rejected because they exceed
    the KV cache) or 'goodput' (other rejections) when goodput is short, else the SLO key whose
    value / limit is highest; 'steady_state' when the SLOs held but the run fell behind or was too
    short to tell (sim.run.steady_state)."""
    if point.goodput < slo.goodput_min:
        return "kv_capacity" if point.n_rejected_kv else "goodput"
    if point.slo_passes and not point.passes and all(r <= 1.0 for r in point.ratios.values()):
        return "steady_state"
    return max(point.ratios, key=lambda key: (point.ratios[key], key))


def describe_binding(point: RatePoint, slo: PlanSLO) -> str:
    """One phrase, e.g. 'ttft_p99 2.41 s > 2 s at 9.51 qps'."""
    binding = binding_constraint(point, slo)
    if binding in ("kv_capacity", "goodput"):
        why = f" (first rejected: {point.first_reject_reason})" if point.first_reject_reason else ""
        return (f"{binding}: only {point.goodput:.1%} finished (< {slo.goodput_min:.0%}) at {point.rate_qps:.3g} qps"
                f"{why}")
    if binding == "steady_state":
        return f"steady_state: the SLOs held but the run {point.steady['verdict']} at {point.rate_qps:.3g} qps"
    limit = next(s.limit_s for s in slo.limits if s.key == binding)
    value = point.values_s[binding]
    shown = "no value" if value is None else f"{value:.4g} s"
    upper = (point.upper_s or {}).get(binding)
    if value is not None and upper is not None and value <= limit < upper:
        shown += f", its {CONFIDENCE:.0%} upper bound {upper:.4g} s,"
    return f"{binding} {shown} > {limit:g} s at {point.rate_qps:.3g} qps"
