"""Energy of a replica's steps, as they are committed: each step's utilisations (sim/cost/energy.py)
set its power (sim/inputs/power.py); the step's energy goes to the replica's tally and, split by
the tokens each sequence brought, to the requests (prefill tokens: `energy_prefill_j`, decode
tokens: `energy_decode_j`). Idle gaps between steps are added per replica at the end of the run
(sim/run/energy_summary.py). Reads no clock: only the plan's own step times."""

from __future__ import annotations

import numpy as np

from sim.cost.energy import StepWork
from sim.inputs.power import PowerModel

# plans and schedulers are sim.engine.sched's StepPlan and Scheduler; not imported here (the
# scheduler's recorder imports this module)

class EnergyTally:
    """One replica's energy (or a cluster's, merged): joules of its steps, its idle watts, its GPUs."""

    def __init__(self, idle_w: float, n_gpus: int, tdp_w: float):
        self.step_j = 0.0  # all GPUs of the replica, over its steps (host transfers at idle power)
        self.step_s = 0.0  # the steps' time (transfers excluded)
        self.compute_s = 0.0  # of it, seconds of peak FLOP/s the steps' FLOPs take (per GPU)
        self.memory_s = 0.0  # and seconds of peak HBM bandwidth their bytes take
        self.idle_w = idle_w * n_gpus  # the whole replica idle
        self.n_gpus = n_gpus
        self.tdp_w = tdp_w
        self.busy_s: float | None = None  # the replica's busy seconds, set when recorders merge
        self.parts: list[EnergyTally] = [self]

    @staticmethod
    def merged(tallies: list[EnergyTally | None]) -> EnergyTally | None:
        """The replicas' tallies side by side (None when any replica has none)."""
        if any(tally is None for tally in tallies):
            return None
        out = EnergyTally(0.0, 0, 0.0)
        out.parts = [part for tally in tallies for part in tally.parts]
        out.step_j = sum(part.step_j for part in out.parts)
        out.step_s = sum(part.step_s for part in out.parts)
        out.compute_s = sum(part.compute_s for part in out.parts)
        out.memory_s = sum(part.memory_s for part in out.parts)
        out.n_gpus = sum(part.n_gpus for part in out.parts)
        return out


def merged_energy(recorders: list) -> tuple[EnergyTally | None, str | None]:
    """A cluster's tally from its replicas' recorders (each tally given its replica's busy time,
    whose complement is its idle gaps), and the first reason one was not metered."""
    for recorder in recorders:
        if recorder.energy is not None:
            recorder.energy.busy_s = recorder.busy_s
    missing = next((recorder.energy_missing for recorder in recorders if recorder.energy_missing), None)
    return EnergyTally.merged([recorder.energy for recorder in recorders]), missing


class EnergyMeter:
    """Prices each committed plan of one scheduler (called before the commit moves its tokens)."""

    def __init__(self, work: StepWork, power: PowerModel, n_gpus: int, tally: EnergyTally):
        self.work, self.power, self.n_gpus, self.tally = work, power, n_gpus, tally

    def _energy_j(self, times_s: np.ndarray, compute_s: np.ndarray, memory_s: np.ndarray) -> np.ndarray:
        """The replica's joules per step: per GPU power from its utilisations, times the step time."""
        tally = self.tally
        tally.step_s += float(times_s.sum())
        tally.compute_s += float(compute_s.sum())
        tally.memory_s += float(memory_s.sum())
        safe = np.where(times_s > 0, times_s, 1.0)
        u_compute = np.minimum(compute_s / safe, 1.0)
        u_memory = np.minimum(memory_s / safe, 1.0)
        p = self.power
        watts = np.minimum(p.tdp_w, p.idle_w + (p.tdp_w - p.idle_w) * (p.compute_weight * u_compute
                                                                        + p.memory_weight * u_memory))
        return watts * times_s * self.n_gpus

    def on_plan(self, plan, sched) -> None:
        if plan.req_ids.size == 0:
            return  # an idle wait: the gap is idle power, added at the end
        self.tally.step_j += plan.transfer_s * self.power.idle_w * self.n_gpus
        if plan.is_decode_run:
            self._run(plan, sched)
        else:
            self._step(plan, sched)

    def _step(self, plan, sched) -> None:
        t = sched.table
        rows, q = plan.req_ids, plan.new_tokens.astype(np.int64)
        c = t.n_computed[rows]
        prefill = q > 1
        decode = q == 1
        qp = q[prefill]
        prefill_pairs = float((qp * (c[prefill] + 0.5 * qp)).sum())
        decode_pairs = float(c[decode].sum()) + 0.5 * int(decode.sum())
        n_sampled = int(np.count_nonzero((q > 0) & (c + q >= t.n_tokens[rows])))
        n_tokens = int(q.sum())
        compute_s, memory_s = self.work.steps([n_tokens], [n_sampled], [prefill_pairs], [decode_pairs],
                                              [float((c + q)[q > 0].sum())])
        energy = float(self._energy_j(plan.step_times_s[:1], compute_s, memory_s)[0])
        self.tally.step_j += energy
        if n_tokens:
            share = energy * q / n_tokens
            np.add.at(t.energy_prefill_j, rows[prefill], share[prefill])
            np.add.at(t.energy_decode_j, rows[decode], share[decode])

    def _run(self, plan, sched) -> None:
        """A decode run: every active sequence brings one token a step over a context one longer."""
        t = sched.table
        rows, k = plan.req_ids, plan.n_steps
        c = t.n_computed[rows].astype(np.float64)
        j = np.arange(k, dtype=np.float64)
        if plan.seq_steps is None:
            n_active = np.full(k, rows.shape[0], dtype=np.int64)
            context_sum = c.sum() + j * rows.shape[0]
        else:  # sequences leave the run after their own steps
            n_active = plan.n_active.astype(np.int64)
            gone = np.cumsum(np.bincount(plan.seq_steps, weights=c, minlength=k + 1))[:k]
            context_sum = c.sum() - gone + j * n_active
        compute_s, memory_s = self.work.steps(n_active, n_active, np.zeros(k), context_sum + 0.5 * n_active,
                                              context_sum + n_active)
        energy = self._energy_j(plan.step_times_s, compute_s, memory_s)
        self.tally.step_j += float(energy.sum())
        per_seq = np.cumsum(energy / np.maximum(n_active, 1))
        steps = np.full(rows.shape[0], k, dtype=np.int64) if plan.seq_steps is None else plan.seq_steps
        np.add.at(t.energy_decode_j, rows, per_seq[steps - 1])


def attach_energy(sched, cost, hw) -> str | None:
    """Give `sched` an EnergyMeter (its recorder an EnergyTally); returns why not, when it cannot."""
    from sim.cost.energy import plain_cost_model

    if hw.power is None:
        return f"hardware profile {hw.name} has no power section"
    gpu_cost = plain_cost_model(cost)
    if gpu_cost is None:
        return "energy of pipeline / expert-parallel layouts is not modelled yet"
    n_gpus = gpu_cost.tp  # a plain roofline replica: one stage of tp GPUs
    tally = EnergyTally(hw.power.idle_w, n_gpus, hw.power.tdp_w)
    sched.recorder.energy = tally
    sched.energy = EnergyMeter(StepWork(gpu_cost), hw.power, n_gpus, tally)
    return None
