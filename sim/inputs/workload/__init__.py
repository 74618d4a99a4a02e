"""Workloads: trace loaders for the common public formats, transformations, synthetic
generators with prefix structure, workload spec YAMLs and trace statistics.

Public entry points: `load_workload`, `load_trace`, `prefix_hit_rate_infinite`,
`prefix_hit_tokens_infinite`, `describe`, `write_canonical_jsonl`, `apply_transforms`.
"""

from sim.inputs.workload.canonical import write_canonical_jsonl
from sim.inputs.workload.load import load_workload
from sim.inputs.workload.prefix import prefix_hit_rate_infinite, prefix_hit_tokens_infinite
from sim.inputs.workload.read_trace import load_trace
from sim.inputs.workload.stats import describe
from sim.inputs.workload.transforms import apply_transforms

__all__ = [
    "apply_transforms",
    "describe",
    "load_trace",
    "load_workload",
    "prefix_hit_rate_infinite",
    "prefix_hit_tokens_infinite",
    "write_canonical_jsonl",
]
