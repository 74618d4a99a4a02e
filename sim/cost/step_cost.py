"""What `CostModel.breakdown` returns: one step's ops, each with its time, FLOPs, bytes and bound."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class OpCost:
    name: str
    time_s: float
    flops: float
    bytes: float
    bound: str  # "compute" | "memory" | "network"
    per_layer: bool


@dataclass(frozen=True)
class StepCost:
    ops: list[OpCost]
    n_layers: int
    overhead_s: float

    @property
    def time_s(self) -> float:
        return sum(op.time_s * (self.n_layers if op.per_layer else 1) for op in self.ops) + self.overhead_s

    @property
    def bound(self) -> str:
        """The bound of the ops that take most of the step's time."""
        totals: dict[str, float] = {}
        for op in self.ops:
            weight = self.n_layers if op.per_layer else 1
            totals[op.bound] = totals.get(op.bound, 0.0) + op.time_s * weight
        return max(totals, key=totals.get)


def op_bound(t_compute: np.ndarray, t_memory: np.ndarray) -> np.ndarray:
    """Per step: "compute" where the compute time is at least the memory time, else "memory"."""
    return np.where(t_compute >= t_memory, "compute", "memory")
