"""What every measurement of one calibration run shares, and how one point is timed.

`RunState.measure` times one configuration both ways (`calibrate.timing`): eager calls
(flushing L2 between them when the rotated copies are too few) and, on CUDA, replays of a
captured CUDA graph. `time_s` is the graph time where one was taken (the kernel time engines
pay under CUDA graphs), else the eager time; `timing_mode` says which, and both are kept.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import torch

from calibrate import grid as grids
from calibrate.measurements import empty_row
from calibrate.timing import (
    Timing,
    cache_bytes,
    graph_l2_state,
    graph_unavailable_reason,
    launches_per_replay,
    n_copies_to_rotate,
    time_graph,
    time_op,
)
from kernels import gemm

log = logging.getLogger(__name__)

TORCH_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp8": gemm.FP8_DTYPE}


@dataclass
class RunState:
    """A run's device, dtype, grid, deadline and provenance, and the rows it has so far."""

    device: str
    dtype_name: str
    grid: grids.Grid
    deadline: float | None  # time.monotonic() value after which remaining points are skipped
    provenance: dict
    flush: object = None
    n_skipped: int = 0
    rows: list = field(default_factory=list)
    skipped_shapes: list = field(default_factory=list)  # one line per shape not timed, and why
    graph_reason: str | None = None  # why CUDA-graph replay is not timed (None: it is)

    def __post_init__(self) -> None:
        self.graph_reason = graph_unavailable_reason(self.device)

    @property
    def dtype(self) -> torch.dtype:
        return TORCH_DTYPES[self.dtype_name]

    def out_of_time(self) -> bool:
        if self.deadline is not None and time.monotonic() > self.deadline:
            self.n_skipped += 1
            return True
        return False

    def too_large(self, what: str, n_bytes: int) -> bool:
        """True (and one line in `skipped_shapes`) when an operand set exceeds the grid's cap."""
        cap = self.grid.max_operand_bytes
        if cap is None or n_bytes <= cap:
            return False
        line = f"{what}: not timed, operands {n_bytes / 2**20:.0f} MiB > this grid's {cap / 2**20:.0f} MiB cap"
        if line not in self.skipped_shapes:
            self.skipped_shapes.append(line)
            log.info("%s", line)
        return True

    def add(self, op: str, timing: dict, tp: int, **fields) -> None:
        row = empty_row() | fields | self.provenance | timing
        row.update(op=op, tp=tp, dtype=self.dtype_name)
        self.rows.append(row)

    def measure(self, make_inputs, n_bytes: int, run, what: str) -> dict:
        """Time `run` over enough fresh `make_inputs()` copies to overflow the cache, eagerly and
        (CUDA) from a captured graph; returns the timing columns of one measurements row."""
        grid = self.grid
        n_copies = n_copies_to_rotate(n_bytes, self.device, grid.rotation_budget_bytes, grid.max_rotation_copies)
        input_sets = [make_inputs() for _ in range(n_copies)]
        rotated = n_copies * n_bytes >= 2 * cache_bytes(self.device)
        between = None if rotated else self.flush
        eager = time_op(run, input_sets, self.device, grid.n_warmup, grid.n_repeats, between)
        columns = {"time_eager_s": eager.time_s, "time_eager_std_s": eager.time_std_s,
                   "l2_state_eager": "rotated" if rotated else ("flushed" if between else "warm")}
        graph = None if self.graph_reason else self._graph(run, input_sets, eager, what)
        if graph is None:
            return columns | {"time_s": eager.time_s, "time_std_s": eager.time_std_s, "n_repeats": eager.n_repeats,
                              "timing_mode": "eager"}  # fmt: skip
        return columns | {
            "time_s": graph.time_s, "time_std_s": graph.time_std_s, "n_repeats": graph.n_replays,
            "timing_mode": "cuda_graph", "time_graph_s": graph.time_s, "time_graph_std_s": graph.time_std_s,
            "graph_launches": graph.n_launches, "l2_state_graph": graph_l2_state(n_copies, n_bytes, self.device),
        }  # fmt: skip

    def _graph(self, run, input_sets, eager: Timing, what: str):
        grid = self.grid
        n_launches = launches_per_replay(eager.time_s, grid.graph_replay_target_s, grid.max_graph_launches)
        try:
            return time_graph(run, input_sets, self.device, n_launches, grid.n_repeats)
        except RuntimeError as error:  # an op torch cannot capture: eager only, said once per shape
            first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
            self.skipped_shapes.append(f"{what}: CUDA-graph capture failed ({first_line}); eager time only")
            log.warning("%s", self.skipped_shapes[-1])
            torch.cuda.synchronize()
            return None
