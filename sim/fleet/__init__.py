"""A day in production: shaped day-long workloads generated lazily, an autoscaled fleet with cold
starts, failures and headroom, cost over time, and day planning (docs/day.md)."""
