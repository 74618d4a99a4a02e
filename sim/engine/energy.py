"""Energy of a replica's steps, as they are committed: each step's utilisations (sim/cost/energy.py)
set its power (sim/inputs/power.py); the step's energy goes to the replica's tally and, split by
the tokens each sequence brought, to the requests (prefill tokens: `energy_prefill_j`, decode
tokens: `energy_decode_j`). Idle gaps between steps are added per replica at the end of the run
(sim/run/energy_summary.py). Reads no clock: only the plan's own step times."""

from __future__ import annotations

import numpy as np

from sim.cost.energy import StepWork
from sim.inputs.power import PowerModel

SCALAR_MAX_SEQS = 64  # steps of at most this many sequences are metered in one Python pass
TINY_S = 1e-300

# plans and schedulers are sim.engine.sched's StepPlan and Scheduler; not imported here (the
# scheduler's recorder imports this module)

class EnergyTally:
    """One replica's energy (or a cluster's, merged): joules of its steps, its idle watts, its GPUs."""

    def __init__(self, idle_w: float, n_gpus: int, tdp_w: float):
        self.step_j = 0.0  # all GPUs of the replica, over its steps (host transfers at idle power)
        self.step_s = 0.0  # the steps' time (transfers excluded)
        self.compute_s = 0.0  # of it, seconds of peak FLOP/s the steps' FLOPs take (per GPU)
        self.memory_s = 0.0  # and seconds of peak HBM bandwidth their bytes take
        # seconds one GPU spent at each whole watt (bin w: [w, w + 1) W) over the steps and transfers;
        # the idle gaps are added at the end (sim/run/energy_summary.py)
        self.watts_s = np.zeros(int(tdp_w) + 1)
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
        tally, p = self.tally, self.power
        tally.step_s += float(np.add.reduce(times_s))
        tally.compute_s += float(np.add.reduce(compute_s))
        tally.memory_s += float(np.add.reduce(memory_s))
        safe = np.maximum(times_s, TINY_S)  # a step of no time has no work either: 0 / TINY_S = 0
        rise = np.minimum(compute_s / safe, 1.0)
        rise *= p.compute_weight
        rise += p.memory_weight * np.minimum(memory_s / safe, 1.0)
        rise *= p.tdp_w - p.idle_w
        rise += p.idle_w
        np.minimum(rise, p.tdp_w, out=rise)
        bins = rise.astype(np.int64)
        tally.watts_s += np.bincount(bins, weights=times_s, minlength=tally.watts_s.shape[0])
        rise *= times_s
        rise *= self.n_gpus
        return rise

    def _energy_scalar_j(self, time_s: float, compute_s: float, memory_s: float) -> float:
        """`_energy_j` of one step in plain Python floats (the same formula)."""
        tally, p = self.tally, self.power
        tally.step_s += time_s
        tally.compute_s += compute_s
        tally.memory_s += memory_s
        safe = time_s if time_s > 0 else 1.0
        u_compute, u_memory = min(compute_s / safe, 1.0), min(memory_s / safe, 1.0)
        watts = min(p.tdp_w, p.idle_w + (p.tdp_w - p.idle_w) * (p.compute_weight * u_compute
                                                                 + p.memory_weight * u_memory))
        tally.watts_s[int(watts)] += time_s
        return watts * time_s * self.n_gpus

    def on_plan(self, plan, sched) -> None:
        if plan.req_ids.size == 0:
            return  # an idle wait: the gap is idle power, added at the end
        if plan.transfer_s:
            self.tally.step_j += plan.transfer_s * self.power.idle_w * self.n_gpus
            self.tally.watts_s[int(self.power.idle_w)] += plan.transfer_s
        if plan.is_decode_run and plan.n_steps == 1 and plan.seq_steps is None:
            self._one_step_run(plan, sched)
        elif plan.is_decode_run:
            self._run(plan, sched)
        elif plan.req_ids.shape[0] <= SCALAR_MAX_SEQS:
            self._step_scalar(plan, sched)
        else:
            self._step(plan, sched)

    def _step_scalar(self, plan, sched) -> None:
        """`_step` in one Python pass over a few sequences."""
        t = sched.table
        rows = plan.req_ids.tolist()
        new = plan.new_tokens.tolist()
        cached = t.n_computed[plan.req_ids].tolist()
        totals = t.n_tokens[plan.req_ids].tolist()
        n_tokens = n_sampled = n_decode = kv = 0
        prefill_pairs = decode_context = 0.0
        for q, c, total in zip(new, cached, totals):
            if q <= 0:
                continue
            n_tokens += q
            kv += c + q
            n_sampled += c + q >= total
            if q == 1:
                n_decode += 1
                decode_context += c
            else:
                prefill_pairs += q * (c + 0.5 * q)
        compute_s, memory_s = self.work.step(n_tokens, n_sampled, prefill_pairs, decode_context + 0.5 * n_decode,
                                             float(kv))
        energy = self._energy_scalar_j(float(plan.step_times_s[0]), compute_s, memory_s)
        self.tally.step_j += energy
        if n_tokens:
            per_token = energy / n_tokens
            prefill_j, decode_j = t.energy_prefill_j, t.energy_decode_j
            for r, q in zip(rows, new):
                if q == 1:
                    decode_j[r] += per_token
                elif q > 1:
                    prefill_j[r] += per_token * q

    def _one_step_run(self, plan, sched) -> None:
        """A decode run of one step (many are: runs cut at arrivals) without `_run`'s arrays."""
        t = sched.table
        rows = plan.req_ids
        n = rows.shape[0]
        context = float(np.add.reduce(t.n_computed[rows]))
        compute_s, memory_s = self.work.step(n, n, 0.0, context + 0.5 * n, context + n)
        energy = self._energy_scalar_j(float(plan.step_times_s[0]), compute_s, memory_s)
        self.tally.step_j += energy
        t.energy_decode_j[rows] += energy / n

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
        cached = t.n_computed[rows]
        context_sum = float(np.add.reduce(cached))
        step_numbers = np.arange(k, dtype=np.float64)
        if plan.seq_steps is None:
            n = rows.shape[0]
            compute_s, memory_s = self.work.decode_steps(n, context_sum + n * step_numbers)
            energy = self._energy_j(plan.step_times_s, compute_s, memory_s)
            total_j = float(np.add.reduce(energy))
            self.tally.step_j += total_j
            t.energy_decode_j[rows] += total_j / n  # a run's sequences are distinct rows
            return
        n_active = plan.n_active  # sequences leave the run after their own steps
        gone = np.add.accumulate(np.bincount(plan.seq_steps, weights=cached, minlength=k + 1))[:k]
        context = context_sum - gone + step_numbers * n_active
        compute_s, memory_s = self.work.steps(n_active, n_active, np.zeros(k), context + 0.5 * n_active,
                                              context + n_active)
        energy = self._energy_j(plan.step_times_s, compute_s, memory_s)
        self.tally.step_j += float(np.add.reduce(energy))
        per_seq = np.add.accumulate(energy / np.maximum(n_active, 1))
        t.energy_decode_j[rows] += per_seq[plan.seq_steps - 1]


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
