"""Per-request measurements of a serving run (vllm bench detailed JSON, AIPerf JSONL, OTLP spans):
readers, the workload as measured, re-simulation fits of engine overhead and residual reports."""

from sim.validate.measured.load import load_measured, measured_format
from sim.validate.measured.run import MeasuredRun

__all__ = ["MeasuredRun", "load_measured", "measured_format"]
