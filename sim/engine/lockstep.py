"""Data-parallel attention ranks in lockstep: the d attention ranks of one replica step together.

**What the engines do.** SGLang `--enable-dp-attention` and vLLM `--data-parallel-size` with
`--enable-expert-parallel` run one scheduler per attention rank, each with its own requests, KV and
batch, but the MoE layers are one expert-parallel group over all of them: every MoE layer's
dispatch and combine is a collective every rank must enter. So the ranks advance forward pass by
forward pass together; a rank with nothing to run still runs one (SGLang: an idle `ForwardMode.IDLE`
batch, agreed per step by `prepare_mlp_sync_batch`, which gathers every rank's token count; vLLM:
`execute_dummy_batch` while any rank of the DP group has unfinished requests, coordinated by the
DP coordinator's wave counter), and a rank's step lasts as long as the slowest rank's: one rank's
prefill chunk stalls the others' decode steps.

**The model.** `LockstepGroup` drives the d ranks of a replica (each a `LockstepRank`, a `Replica`
without a loop of its own; the router still deals requests to ranks). Each group step:

1. every rank plans its next step (or decode run) with the group's horizon (the earliest next
   arrival of any rank: an arrival anywhere changes the MoE layer's tokens);
2. the group runs L steps, L the fewest any rank planned (decode runs of the others are cut to L;
   a rank's decode run takes its blocks for those L steps only: `DecodeRuns.take_run_blocks`),
   fewer if the horizon falls earlier;
3. step i of the group lasts  max_r (own_r,i + n_layers (G(T_all) - G(d T_r))): a rank's own step
   time priced as if every rank carried its T_r tokens (`ExpertParallelCostModel`), with its MoE
   part (routed experts, dispatch, combine) replaced by the MoE part of the tokens all ranks hold,
   T_all = sum_r T_r (`moe_group_layer_s`); idle ranks run dummy batches that cost nothing here;
   a rank's swap transfer is added to its first step;
4. every rank with a plan commits it at the group step's end.

A speculating rank's T_r counts the k+1 tokens each decoding sequence verifies (`StepPlan.moe_tokens`);
its draft's MoE layer (MTP) is priced as if every rank drafted as many (not re-priced here).
Ranks that carry equal batches get exactly their own step times (G(T_all) = G(d T_r)). Decode runs
past finishes (`sim.engine.sched.past_finishes`) are off for grouped ranks. Nothing here runs for a
replica without data-parallel attention. Fast paths, each the same value bit for bit
(tests/test_lockstep_fast_paths.py): the horizon of a source that is the same for every rank is
asked once; one-step group times are summed on Python floats; MoE re-pricings are remembered per
(rank tokens, all tokens); ranks reuse their last costed decode run (`DecodeRuns._priced_ahead`).
"""

from __future__ import annotations

import math

import numpy as np
import simpy

from sim.engine.adp_balance import AdpBalancer
from sim.engine.replica import ArrivalSource, Replica


class LockstepRank(Replica):
    """One attention rank of a data-parallel-attention replica: a Replica whose steps its
    `LockstepGroup` runs (it has no SimPy process of its own)."""

    group: LockstepGroup | None = None

    def _start(self) -> None:
        pass  # the group's process runs this rank

    def wake(self) -> None:
        if self.group is not None:
            self.group.wake()

    def plan_now(self, now_s: float, horizon_s: float):
        """This rank's next plan (None: nothing to run now), as `Replica._loop` finds one: held-back
        arrivals admitted when nothing else runs; a head that can never start rejected."""
        sched = self.sched
        while True:
            plan = sched.schedule(now_s, horizon_s) if sched.has_work() else None
            if plan is not None:
                return plan
            if self._pending:
                self._admit_pending(everyone=True)
                continue
            if sched.has_work() and not sched.running and not sched.blocked_on_transfers():
                sched.reject_unschedulable(now_s)
                continue
            return None


class LockstepGroup:
    """The attention ranks of one replica, stepping together (module docstring)."""

    def __init__(self, env: simpy.Environment, ranks: list[LockstepRank], source: ArrivalSource,
                 balancer: AdpBalancer | None = None):
        self.env, self.ranks, self.source = env, ranks, source
        self.balancer = balancer  # TensorRT-LLM attention-DP balancing (sim.engine.adp_balance), or None
        self._idle: simpy.Event | None = None
        self._moe_memo: dict = {}  # (cost, rank tokens, all ranks' tokens) -> MoE re-pricing s (_moe_correction_s)
        for rank in ranks:
            rank.group = self
        env.process(self._loop())

    def wake(self) -> None:
        if self._idle is not None and not self._idle.triggered:
            self._idle.succeed()

    def _loop(self):
        env, ranks = self.env, self.ranks
        for rank in ranks:  # a run past finishes cannot be cut to the group's steps
            rank.sched.runs_past_finishes = False
            rank.sched.defers_run_blocks = True  # blocks for the steps the group runs, taken below
        while True:
            now_s = env.now
            for rank in ranks:
                if rank._pending:
                    rank._admit_pending(everyone=False)
            horizon_s = self._horizon_s(now_s)
            if self.balancer is not None:
                hold = self.balancer.hold([rank.sched for rank in ranks])
                for rank in ranks:
                    rank.sched.holds_context = hold
            plans = [rank.plan_now(now_s, horizon_s) for rank in ranks]
            if all(plan is None for plan in plans):
                self._idle = env.event()
                yield self._idle
                self._idle = None
                continue
            times_s = self._group_times(plans, now_s, horizon_s)
            if self.balancer is not None:
                self.balancer.ran(times_s.shape[0])
            for rank, plan in zip(ranks, plans):
                if plan is not None:
                    if plan.blocks_to_take is not None:
                        rank.sched.take_run_blocks(plan, times_s.shape[0])
                    elif plan.n_steps > times_s.shape[0]:
                        rank.sched.truncate_run(plan, times_s.shape[0])
                    _retime(plan, times_s)
            duration_s = float(np.add.reduce(times_s))
            for rank in ranks:
                rank._in_flight = True
            yield env.timeout(duration_s)
            finished = 0
            for rank, plan in zip(ranks, plans):
                rank._in_flight = False
                rank._last_step_start_s = now_s + duration_s - float(times_s[-1])
                if plan is not None:
                    finished += rank.sched.commit(plan, env.now)
            if finished and self.source.reacts_to_completions:
                yield env.timeout(0)

    def _horizon_s(self, now_s: float) -> float:
        """The earliest of the ranks' horizons (`Replica._horizon_s`): now if any holds arrivals back,
        else the next arrival that could join a rank. A source whose next arrival is the same for
        every rank (`replica_blind`: the disaggregated decode horizon; an arrival source that does
        not place arrivals up front) is asked once, not once per rank."""
        source = self.source
        if not getattr(source, "replica_blind", False):
            return min(rank._horizon_s() for rank in self.ranks)
        next_s = source.next_arrival_s()
        for rank in self.ranks:
            if rank._pending:
                return min(now_s, next_s)
        return next_s

    def _group_times(self, plans: list, now_s: float, horizon_s: float) -> np.ndarray:
        """The group's step times: L = the fewest steps any rank planned, cut after the step during
        which `horizon_s` falls."""
        n_steps = min(plan.n_steps for plan in plans if plan is not None)
        costs = [rank.sched.cost for rank in self.ranks]
        times_s = lockstep_step_times(plans, costs, n_steps, self._moe_memo)
        if n_steps > 1 and math.isfinite(horizon_s):
            ends_s = np.add.accumulate(times_s) + now_s
            times_s = times_s[: min(n_steps, int(np.searchsorted(ends_s, horizon_s)) + 1)]
        return times_s


def lockstep_step_times(plans: list, costs: list, n_steps: int, memo: dict | None = None) -> np.ndarray:
    """Step times of ranks stepping together for `n_steps` steps: per step the slowest rank's own
    time with its MoE part re-priced on every rank's tokens (module docstring, step 3). `plans`:
    each rank's plan or None (idle: a dummy batch); `costs`: each rank's cost model (an
    `ExpertParallelCostModel`, or an engine wrapper of one; a model without `moe_group_layer_s`,
    as a test's constant step time, keeps its own times). `memo`: the group's MoE re-pricings."""
    tokens = [0 if plan is None else _n_tokens(plan) for plan in plans]
    total = sum(tokens)
    if n_steps == 1:  # most group steps: the same sums on Python floats (IEEE, so bit for bit)
        return np.array([max(_first_step_s(plan, cost, n_tokens, total, memo)
                             for plan, cost, n_tokens in zip(plans, costs, tokens) if plan is not None)])
    rank_times = []
    for plan, cost, n_tokens in zip(plans, costs, tokens):
        if plan is None:
            continue
        times = np.array(plan.step_times_s[:n_steps], dtype=np.float64)
        if n_tokens and hasattr(cost, "moe_group_layer_s"):  # a static batching window keeps its own time
            times += _moe_correction_s(cost, n_tokens, total, memo)
        times[0] += plan.transfer_s
        rank_times.append(times)
    return rank_times[0] if len(rank_times) == 1 else np.maximum.reduce(rank_times)


def _n_tokens(plan) -> int:
    """Tokens a rank's plan brings to each of its steps (a decode run: one per sequence; speculative
    decoding: the k+1 each decoding sequence verifies, `StepPlan.moe_tokens`)."""
    if plan.moe_tokens is not None:
        return plan.moe_tokens
    if plan.is_decode_run and plan.seq_steps is None:
        return plan.req_ids.shape[0]
    return int(np.add.reduce(plan.new_tokens))


def _moe_correction_s(cost, n_tokens: int, total: int, memo: dict | None = None) -> float:
    """What re-pricing a rank's MoE layers on every rank's `total` tokens adds to its own step time
    (from `memo` when it was priced before: the same value)."""
    key = (id(cost), n_tokens, total)
    value = None if memo is None else memo.get(key)
    if value is None:
        d = cost.expert_parallel.token_ranks
        value = cost.model.n_layers * (cost.moe_group_layer_s(total) - cost.moe_group_layer_s(d * n_tokens))
        if memo is not None:
            memo[key] = value
    return value


def _first_step_s(plan, cost, n_tokens: int, total: int, memo: dict | None) -> float:
    """`lockstep_step_times`' one-step value for one rank, in the same order of operations."""
    time_s = float(plan.step_times_s[0])
    if n_tokens and hasattr(cost, "moe_group_layer_s"):
        time_s += _moe_correction_s(cost, n_tokens, total, memo)
    return time_s + plan.transfer_s


def _retime(plan, times_s: np.ndarray) -> None:
    """Give a rank's plan the group's step times (its swap transfer inside the first step)."""
    own = times_s.copy()
    own[0] -= plan.transfer_s
    plan.step_times_s = own
    plan.n_steps = own.shape[0]
    plan.duration_s = float(times_s[0]) if plan.n_steps == 1 else float(np.add.reduce(times_s))
    if plan.block_tokens is not None:
        plan.block_tokens = plan.block_tokens[: plan.n_steps]


def group_ranks(env: simpy.Environment, ranks: list[LockstepRank], ranks_per_replica: int,
                source: ArrivalSource, balance=None) -> list[LockstepGroup]:
    """One LockstepGroup per replica over its consecutive ranks; `balance` (a preset's enabled
    AttentionDpBalance) gives each group its own balancer."""
    return [LockstepGroup(env, ranks[i:i + ranks_per_replica], source,
                          None if balance is None else AdpBalancer(balance.timeout_iters, balance.batching_wait_iters))
            for i in range(0, len(ranks), ranks_per_replica)]
