"""The reference stepper's energy (sim/engine/energy.py's model, written out one step at a time):
the step's sums taken here, its power from `PowerModel.watts`, its joules split over its sequences
by the tokens each brought. The engine's metered paths (scalar, array, decode runs) must agree."""

from __future__ import annotations

from sim.cost.energy import StepWork, plain_cost_model
from sim.engine.energy import EnergyTally


class ReferenceEnergy:
    def __init__(self, gpu_cost, power, table):
        self.work, self.power, self.table = StepWork(gpu_cost), power, table
        self.n_gpus = gpu_cost.tp
        self.tally = EnergyTally(power.idle_w, self.n_gpus, power.tdp_w)

    def step(self, ids: list[int], new_tokens: list[int], cached: list[int], n_sampled: int, step_s: float,
             transfer_s: float) -> None:
        """One step (called before its tokens move into the cache)."""
        prefill_pairs = decode_pairs = 0.0  # causal query-key pairs: q new tokens over c cached
        kv_tokens = 0
        for q, c in zip(new_tokens, cached):
            if q > 1:
                prefill_pairs += q * (c + 0.5 * q)
            elif q == 1:
                decode_pairs += c + 0.5
            if q > 0:
                kv_tokens += c + q
        n_tokens = sum(new_tokens)
        compute_s, memory_s = self.work.step(n_tokens, n_sampled, prefill_pairs, decode_pairs, kv_tokens)
        watts = self.power.watts(min(compute_s / step_s, 1.0), min(memory_s / step_s, 1.0))
        joules = watts * step_s * self.n_gpus
        tally = self.tally
        tally.step_j += joules + transfer_s * self.power.idle_w * self.n_gpus
        tally.watts_s[int(watts)] += step_s
        tally.watts_s[int(self.power.idle_w)] += transfer_s
        tally.step_s += step_s
        tally.compute_s += compute_s
        tally.memory_s += memory_s
        for rid, q in zip(ids, new_tokens):
            column = self.table.energy_prefill_j if q > 1 else self.table.energy_decode_j
            if q > 0:
                column[rid] += joules * q / n_tokens


def reference_energy(cost, table) -> ReferenceEnergy | None:
    """Energy for the reference stepper where the engine meters it (a power section, a plain model)."""
    gpu_cost = plain_cost_model(cost)
    if gpu_cost is None or gpu_cost.hw.power is None:
        return None
    return ReferenceEnergy(gpu_cost, gpu_cost.hw.power, table)
