"""The planner's SLOs are the shared ones of `sim.inputs.slo` (same syntax and meaning in simulate, sweep and plan)."""

from sim.inputs.slo import DEFAULT_GOODPUT_MIN, METRICS, PERCENTILES, SLO_KEYS, PlanSLO, SloLimit, parse_slo

__all__ = ["DEFAULT_GOODPUT_MIN", "METRICS", "PERCENTILES", "SLO_KEYS", "PlanSLO", "SloLimit", "parse_slo"]
