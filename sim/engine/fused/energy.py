"""The fused core's energy: the reference's model (sim/engine/reference/energy.py) with a decode step
metered from the batch's sums and its joules shared out through one running total.

A decode step of n sequences gives each `joules / n` (the reference's `joules * q / n_tokens` with
q = 1). The fused core adds that share to `per_sequence_j`, a running total over the run's decode
steps, and a request's decode joules are the total's rise while it ran (taken as it leaves the
batch): one addition per step instead of one per sequence. The request's joules then differ from the
reference's sequential sum by rounding only (the total runs over the whole replay)."""

from __future__ import annotations

import numpy as np

from sim.cost.energy import plain_cost_model
from sim.engine.reference.energy import ReferenceEnergy


class FusedEnergy(ReferenceEnergy):
    """`ReferenceEnergy` (its `step` meters prefill steps) plus an O(1) decode step. The tally's
    watts histogram is a Python list while the run lasts (`finish` makes it an array again): the
    same additions in the same order, without numpy's per-element cost."""

    def __init__(self, gpu_cost, power, table):
        super().__init__(gpu_cost, power, table)
        self.tally.watts_s = self.tally.watts_s.tolist()
        self.fixed: dict[int, tuple[float, float, float, float]] = {}  # per batch size: layer and LM head work
        self.watts_span = power.tdp_w - power.idle_w

    def decode(self, n: int, context_tokens: int, step_s: float, transfer_s: float) -> float:
        """Meter a decode step of `n` sequences over `context_tokens` cached tokens (`StepWork.step` and
        `PowerModel.watts` with the same float operations); returns each sequence's share (J)."""
        fixed = self.fixed.get(n)
        if fixed is None:
            work = self.work
            work.step(n, n, 0.0, 0.0, 0.0)  # grows its tables to n
            fixed = self.fixed[n] = (work._layer_lists[0][n], work._layer_lists[1][n], work._lm_lists[0][n],
                                     work._lm_lists[1][n])
        work, power, tally = self.work, self.power, self.tally
        compute_s = work.n_layers * (fixed[0] + (context_tokens + 0.5 * n) * work.decode_pair_s) + fixed[2]
        memory_s = work.n_layers * (fixed[1] + (context_tokens + n) * work.kv_token_s + n * work.io_token_s) + fixed[3]
        rise = power.compute_weight * min(compute_s / step_s, 1.0) + power.memory_weight * min(memory_s / step_s, 1.0)
        watts = min(power.tdp_w, power.idle_w + self.watts_span * rise)
        joules = watts * step_s * self.n_gpus
        tally.step_j += joules + transfer_s * power.idle_w * self.n_gpus
        tally.watts_s[int(watts)] += step_s
        if transfer_s:
            tally.watts_s[int(power.idle_w)] += transfer_s
        tally.step_s += step_s
        tally.compute_s += compute_s
        tally.memory_s += memory_s
        return joules / n

    def finish(self) -> None:
        self.tally.watts_s = np.array(self.tally.watts_s)


def fused_energy(cost, table) -> tuple[FusedEnergy | None, str | None]:
    """(the meter, None), or (None, why not) as `sim.engine.energy.attach_energy` says it; metered
    where the reference meters (`reference_energy`: a plain roofline model on hardware with power)."""
    gpu_cost = plain_cost_model(cost)
    if gpu_cost is None:
        if getattr(getattr(cost, "hw", None), "power", None) is None:
            return None, None
        return None, "energy of pipeline / expert-parallel layouts is not modelled yet"
    if gpu_cost.hw.power is None:
        return None, f"hardware profile {gpu_cost.hw.name} has no power section"
    return FusedEnergy(gpu_cost, gpu_cost.hw.power, table), None
