"""Report helpers for notebooks and people: latency breakdowns, headline tables, small plots."""

from sim.run.report.latency import PARTS, breakdown_table, empirical_cdf, latency_parts
from sim.run.report.tables import headline_table, summary_value

__all__ = ["PARTS", "breakdown_table", "empirical_cdf", "headline_table", "latency_parts", "summary_value"]
