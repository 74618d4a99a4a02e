"""The planner's SLOs are the shared ones of `sim.slo` (same syntax and meaning in simulate, sweep and plan)."""

from sim.slo import DEFAULT_GOODPUT_MIN, METRICS, PERCENTILES, SLO_KEYS, PlanSLO, SloLimit, parse_slo

__all__ = ["DEFAULT_GOODPUT_MIN", "METRICS", "PERCENTILES", "SLO_KEYS", "PlanSLO", "SloLimit", "parse_slo"]
