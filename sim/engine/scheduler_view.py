"""What the recorder (sim/engine/metrics.py) reads of a replica's scheduler, as a protocol: the
scheduler (sim.engine.sched.base.Scheduler) holds a Recorder, so the recorder knows it only by this
shape instead of importing it back."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np

from sim.engine.kv.blocks import BlockManager
from sim.engine.request import RequestTable

if TYPE_CHECKING:  # (sim.engine.sched's package face imports the scheduler, which imports the recorder)
    from sim.engine.sched.plan import StepPlan


class Scheduler(Protocol):
    """What the recorder reads of a replica's scheduler (sim.engine.sched.base.Scheduler, which
    holds a Recorder: the recorder knows it only by this shape)."""

    replica: int
    running: list[int]
    table: RequestTable
    blocks: BlockManager

    def n_request_blocks(self) -> int: ...

    def run_block_tokens(self, plan: StepPlan) -> np.ndarray: ...
