"""What the fused core measures: the reference stepper's record, with the inter-token gaps kept as
(gap, count) pairs (one per cohort of sequences that sampled together) instead of one per token."""

from __future__ import annotations

import numpy as np

from sim.engine.growable import Growable
from sim.engine.reference.record import StepRecord


class FusedRecord(StepRecord):
    """The fused core's measurements: a StepRecord whose inter-token gaps come as (gap, count) pairs."""

    def __init__(self, n_blocks: int, block_size: int):
        super().__init__(n_blocks, block_size)
        self.gap_counts: list[int] = []

    @property
    def gap_values(self) -> Growable:
        return Growable.holding(np.array(self.gaps_s, dtype=np.float64))

    @property
    def gap_weights(self) -> Growable:
        return Growable.holding(np.array(self.gap_counts, dtype=np.int64))
