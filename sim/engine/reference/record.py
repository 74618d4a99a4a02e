"""What the reference stepper measures, one step at a time: the fields of `sim.engine.metrics.Recorder`
that a run's summary reads (step count, preemptions, inter-token gaps, KV utilisation and
fragmentation integrals), kept as plain sums and lists, plus one row per step."""

from __future__ import annotations

import numpy as np

from sim.engine.growable import Growable


class StepRecord:
    """The reference stepper's measurements; reads like a Recorder where a summary looks."""

    attribution = None  # a StepAttribution (sim/engine/reference/attribution.py) when latency attribution is on
    request_gaps = None
    energy = None  # a sim.engine.energy.EnergyTally where the engine meters energy (set by the stepper)
    energy_missing = None

    def __init__(self, n_blocks: int, block_size: int):
        self.n_blocks, self.block_size = n_blocks, block_size
        self.n_steps = 0
        self.preemptions = 0
        self.busy_s = 0.0
        self.kv_util_time = 0.0  # integral over busy time of used blocks / all blocks
        self.kv_waste_time = 0.0  # integral of (slots requests hold - tokens in them) / those slots
        self.gaps_s: list[float] = []  # every inter-token gap, one per token after a request's first
        # per step: (start_s, step_time_s, batch_size, prefill_tokens, decode_tokens, kv_blocks_used)
        self.steps: list[tuple[float, float, int, int, int, int]] = []

    def step(self, start_s: float, duration_s: float, new_tokens: list[int], used_blocks: int,
             running_tokens: int) -> None:
        """One step that ran `new_tokens` per sequence and took `duration_s`; the KV figures are those
        after its tokens are in the cache, before the requests it finished give their blocks back."""
        self.n_steps += 1
        self.busy_s += duration_s
        self.kv_util_time += duration_s * used_blocks / self.n_blocks
        if used_blocks > 0:
            slots = used_blocks * self.block_size
            self.kv_waste_time += duration_s * max(slots - float(running_tokens), 0.0) / slots
        prefill_tokens = sum(n for n in new_tokens if n > 1)  # a one-token prompt counts as a decode token
        decode_tokens = sum(1 for n in new_tokens if n == 1)
        self.steps.append((start_s, duration_s, len(new_tokens), prefill_tokens, decode_tokens, used_blocks))

    @property
    def gap_values(self) -> Growable:
        return Growable.holding(np.array(self.gaps_s, dtype=np.float64))

    @property
    def gap_weights(self) -> Growable:
        return Growable.holding(np.ones(len(self.gaps_s), dtype=np.int64))

    @property
    def kv_utilization_mean(self) -> float:
        return self.kv_util_time / self.busy_s if self.busy_s else 0.0

    @property
    def kv_fragmentation(self) -> float:
        return self.kv_waste_time / self.busy_s if self.busy_s else 0.0

    def steps_columns(self) -> dict[str, np.ndarray]:
        """The steps as columns, named as `Recorder.steps_frame` names them (one replica: 0)."""
        names = ("start_s", "step_time_s", "batch_size", "prefill_tokens", "decode_tokens", "kv_blocks_used")
        columns = {name: np.array([row[i] for row in self.steps]) for i, name in enumerate(names)}
        return {"replica": np.zeros(len(self.steps), dtype=np.int64), **columns}

    def steps_frame(self):
        """The steps as `Recorder.steps_frame` gives them (a run folder's steps.parquet)."""
        import pandas as pd  # here: a run that writes no steps table never needs it

        frame = pd.DataFrame(self.steps_columns())
        for name in ("replica", "batch_size", "prefill_tokens", "decode_tokens", "kv_blocks_used"):
            frame[name] = frame[name].astype(np.int64)
        return frame
