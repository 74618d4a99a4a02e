"""Autoscaling policies: how many replicas a fleet wants at a decision (pure functions)."""

from __future__ import annotations

import math

import numpy as np

from sim.fleet.spec import Predictive, StaticPolicy, TargetTracking

FORECAST_STEP_S = 10.0


def tracked_value(policy: TargetTracking, metrics: dict, n_ready: int) -> float:
    """The metric per ready replica (kv_usage is already a mean share)."""
    if policy.metric == "kv_usage":
        return metrics["kv_usage"]
    return metrics[policy.metric] / n_ready


def target_wanted(policy: TargetTracking, metrics: dict, n_ready: int, n_current: int) -> int:
    """Target tracking: outside the band [target x down, target x up], ceil(ready x value / target);
    inside it, the current count (no ready replica: the current count)."""
    if n_ready == 0:
        return n_current
    value = tracked_value(policy, metrics, n_ready)
    if policy.target * policy.scale_down_below <= value <= policy.target * policy.scale_up_above:
        return n_current
    return max(math.ceil(n_ready * value / policy.target - 1e-9), 1)


def predictive_wanted(policy: Predictive, rate_rps, now_s: float, lead_s: float, interval_s: float) -> int:
    """Enough replicas for the highest forecast rate until the next decision's replicas are ready."""
    grid = np.arange(now_s, now_s + lead_s + interval_s + FORECAST_STEP_S, FORECAST_STEP_S)
    peak = float(np.max(rate_rps(grid)))
    return max(math.ceil(peak * (1 + policy.margin) / policy.rate_per_replica_rps - 1e-9), 1)


def wanted_replicas(policy, metrics: dict, n_ready: int, n_current: int, rate_rps, now_s: float,
                    lead_s: float, interval_s: float) -> int:
    if isinstance(policy, StaticPolicy):
        return policy.replicas
    if isinstance(policy, TargetTracking):
        return target_wanted(policy, metrics, n_ready, n_current)
    wanted = predictive_wanted(policy, rate_rps, now_s, lead_s, interval_s)
    if policy.reactive is not None:
        wanted = max(wanted, target_wanted(policy.reactive, metrics, n_ready, n_current))
    return wanted


def initial_replicas(policy, rate_rps, lead_s: float, interval_s: float) -> int:
    """The count at t = 0: static's own; predictive's forecast; target tracking's minimum (1)."""
    if isinstance(policy, StaticPolicy):
        return policy.replicas
    if isinstance(policy, Predictive):
        return predictive_wanted(policy, rate_rps, 0.0, lead_s, interval_s)
    return 1
