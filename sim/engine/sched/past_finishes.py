"""Decode runs past finishes. When nothing waits for a seat and nothing is swapped out, a finish
changes nothing but the batch: the finished sequence leaves and the steps after it are those of
the sequences still going, which is what the engine would plan next anyway. So a decode run goes
on past its finishes, segment by segment (the steps between two finishes compute the same
sequences), until the next arrival could join (the horizon), the next step's blocks would not fit
(finished sequences' blocks count as taken until the commit frees them), or MAX_DECODE_RUN_STEPS.
About a third fewer plans on the Splitwise replay. Mixed into `sim.engine.sched.base.Scheduler`.

Only where no one reads the replica mid-run (`runs_past_finishes`, set by the open-loop arrival
source for one replica or replicas the router places up front: a closed loop's clients react to
each finish, state-reading routers look at the replica): no swap traffic, no pending
copy-on-write, the run holds every running request and the roofline hot path costs it. A
planner's early-stop watch hears a run's finishes, each with its own time, at the run's commit.
"""

from __future__ import annotations

import math

import numpy as np

import sim.engine.sched.decode_runs as decode_runs
from sim.cost.runs_past_finishes import decode_steps_past_finishes
from sim.engine.sched.plan import StepPlan, ones_int64

# runs past finishes are planned in plain Python (~1 us a step): at most this many steps (the engine
# simply plans the next run) and this many sequences
MAX_STEPS_PAST_FINISHES = 512
MAX_SEQS_PAST_FINISHES = 256


class PastFinishes:
    """Planning and committing runs past finishes (needs the Scheduler's table, blocks, recorder)."""

    can_run_past_finishes = True  # a role that hands requests over on finishing (sim/engine/disagg) says False
    runs_past_finishes = False  # set per replica by the arrival source when its routing allows it

    def may_pass_finishes(self, ids: list[int], transfer_s: float, horizon_s: float) -> bool:
        """Whether a decode run of `ids` may go on past its first finish (see the module docstring)."""
        return (self.runs_past_finishes and not transfer_s and not self.waiting and not self.swapped
                and not self._cow_pending and len(ids) == len(self.running) and len(ids) <= MAX_SEQS_PAST_FINISHES
                and self._hot is not None and math.isfinite(horizon_s))

    def run_past_finishes(self, ids: list[int], rid: np.ndarray, contexts: np.ndarray, remaining: np.ndarray,
                          now_s: float, horizon_s: float, n_grown: int, first_finish: int) -> StepPlan | None:
        """Plan and take the blocks of a decode run of `ids` that goes on past finishes (plain Python:
        `sim.cost.runs_past_finishes.decode_steps_past_finishes`; `remaining`: the tokens each has left to compute,
        `first_finish` their least); None when it cannot be planned that way (the caller plans the
        plain run)."""
        max_steps = min(decode_runs.MAX_DECODE_RUN_STEPS, MAX_STEPS_PAST_FINISHES)
        run = decode_steps_past_finishes(self._hot, contexts, remaining, now_s, horizon_s, max_steps,
                                         self.blocks.n_free)
        if run is None or not run.times_s:
            return None
        k = len(run.times_s)
        times = np.array(run.times_s)
        if run.n_active[-1] == len(ids):  # nobody left before the last step: a plain run
            self._grow_run(ids, contexts, k, n_grown)
            return StepPlan(rid, ones_int64(len(ids)), times, is_decode_run=True,
                            steps_to_first_finish=first_finish, block_tokens=np.array(run.kv_tokens,
                                                                                              dtype=np.float64))
        steps = np.minimum(remaining, k)
        self._grow_each(ids, contexts, steps, n_grown)
        plan = StepPlan(rid, ones_int64(len(ids)), times, is_decode_run=True, seq_steps=steps,
                        n_active=np.array(run.n_active), block_taken=np.array(run.taken))
        plan.step_end_s = now_s + np.add.accumulate(times)
        plan.step_end_s[-1] = now_s + plan.duration_s  # where the engine's clock lands
        return plan

    def _grow_each(self, ids: list[int], contexts: np.ndarray, steps: np.ndarray, n_grown: int) -> None:
        """Take the blocks each sequence j needs for its steps[j] steps beyond the first `n_grown`
        (0 or 1) steps' (see `DecodeRuns._grow_run`)."""
        size = self.blocks.block_size
        # one block at each step s < n_steps with s = (-c) mod B (mod B): (n_steps - 1 + c mod B) // B of
        # them, plus the one of step 0 when c fills its blocks (c mod B = 0) unless already taken
        if len(ids) <= decode_runs.SCALAR_GROW_MAX_SEQS:
            counts = [(n_steps - 1 + c % size) // size + (0 if c % size else 1 - n_grown)
                      for c, n_steps in zip(contexts.tolist(), steps.tolist())]
            self.blocks.grow_by(ids, counts)
            return
        filled = contexts % size
        counts = steps - 1
        counts += filled
        counts //= size
        if not n_grown:
            counts += filled == 0
        self.blocks.grow_by(ids, counts.tolist())

    def _commit_run_past_finishes(self, plan: StepPlan, end_s: float) -> int:
        """Commit a run past finishes: each sequence advances by its own steps and ends at its last
        step's end; those that finished before the last step are released (at their own end) before
        the run's KV use is recorded, which reads the pool before and after each release."""
        t, rid, steps, k = self.table, plan.req_ids, plan.seq_steps, plan.n_steps
        contexts = t.n_computed[rid]
        self.recorder.add_run_gaps(plan.step_end_s[0] - t.last_token_s[rid], plan.step_times_s[1:], rid,
                                   plan.n_active[1:], steps)
        t.n_computed[rid] += steps
        t.n_tokens[rid] += steps
        t.last_token_s[rid] = plan.step_end_s[steps - 1]
        finishing: dict[int, list[int]] = {}  # step after which they are done -> rows, in run order
        early = steps < k
        for r, n_steps in zip(rid[early].tolist(), steps[early].tolist()):
            finishing.setdefault(n_steps, []).append(r)
        used_now, request_blocks_now = used, request_blocks = self.blocks.n_used, self.n_request_blocks()
        released = []  # (first step without them, blocks freed, request blocks given up)
        for n_steps in sorted(finishing):
            self._release_finished(finishing[n_steps], float(plan.step_end_s[n_steps - 1]))
            used_after, request_blocks_after = self.blocks.n_used, self.n_request_blocks()
            released.append((n_steps, used - used_after, request_blocks - request_blocks_after))
            used, request_blocks = used_after, request_blocks_after
        self.recorder.run_past_finishes(self, plan, contexts, used_now, request_blocks_now, released)
        return sum(map(len, finishing.values())) + self._finish_done(rid[steps == k], end_s)
