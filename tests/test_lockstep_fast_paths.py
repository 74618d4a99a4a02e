"""The lockstep path's shortcuts give what the plain computation gives, bit for bit: a decode run
of the same sequences some steps on reuses the last costed run's later steps
(`DecodeRuns._priced_ahead`), and a group's one-step time is summed on Python floats
(sim/engine/lockstep.py)."""

import numpy as np
import pytest

from sim.cost.expert_parallel import ExpertParallelCostModel, ExpertParallelism
from sim.engine.lockstep import lockstep_step_times
from sim.engine.sched.decode_runs import DecodeRuns
from sim.engine.sched.plan import StepPlan
from sim.inputs.config import EngineConfig
from sim.inputs.hardware import load_hardware
from sim.inputs.layout.parallel import ReplicaLayout
from sim.inputs.model import load_model
from sim.run.invoke import load_run_workload
from sim.run.simulate import simulate
from sim.run.summary import requests_frame, summarize

DP4 = ReplicaLayout(tp=4, dp=4, ep=4, enable_dp_attention=True)  # SGLang: 4 attention ranks of TP1


def _cost(model: str, hardware: str, weight_dtype: str = "bf16") -> ExpertParallelCostModel:
    return ExpertParallelCostModel(load_model(model), load_hardware(hardware), DP4, weight_dtype, "bf16", 16,
                                   expert_parallel=ExpertParallelism.of(DP4))


class _Runs(DecodeRuns):
    """Just the memo of a scheduler's decode runs over one cost model."""

    prices_runs_ahead = True

    def __init__(self, cost):
        self.cost = cost


@pytest.mark.parametrize("model, hardware, weight_dtype", [("qwen3-30b-a3b", "h100-sxm", "bf16"),
                                                          ("deepseek-v3", "gb200-nvl72", "fp8")])
def test_a_run_some_steps_on_reuses_the_priced_steps_bit_for_bit(model, hardware, weight_dtype):
    cost = _cost(model, hardware, weight_dtype)
    rng = np.random.default_rng(0)
    n_hits = 0
    for _ in range(60):
        contexts = rng.integers(0, 6000, size=int(rng.integers(1, 40))).astype(np.int64)
        runs = _Runs(cost)
        first_times, first_kv = runs._costed_run(contexts, 64)
        assert not first_times.flags.writeable  # shared by the plans cut from it
        for offset in sorted(rng.integers(0, 70, size=5).tolist()):
            later = contexts + offset
            n_steps = int(rng.integers(1, 64))
            times, kv = runs._costed_run(later, n_steps)
            fresh_times, fresh_kv = cost.decode_run(later, n_steps)
            assert times.tobytes() == fresh_times.tobytes() and kv.tobytes() == fresh_kv.tobytes()
            n_hits += offset + n_steps <= 64
    assert n_hits > 50  # the memo really answered
    runs = _Runs(cost)
    runs._costed_run(np.array([100, 200]), 8)
    assert runs._priced_ahead(np.array([101, 202])) is None  # not the same sequences one step on
    assert runs._priced_ahead(np.array([99, 199])) is None  # before the priced run
    assert runs._priced_ahead(np.array([100, 200, 300])) is None


def test_one_step_group_time_equals_the_array_sum():
    cost = _cost("qwen3-30b-a3b", "h100-sxm")
    rng = np.random.default_rng(1)
    for _ in range(50):
        plans = []
        for _rank in range(4):
            if rng.random() < 0.2:
                plans.append(None)
                continue
            n = int(rng.integers(1, 30))
            q = np.ones(n, dtype=np.int64) if rng.random() < 0.7 else rng.integers(1, 600, size=n)
            c = rng.integers(0, 4000, size=n)
            plans.append(StepPlan(np.arange(n), q, np.array([cost.step_time_s(q, c, n)]),
                                  is_decode_run=bool((q == 1).all()), transfer_s=float(rng.random() < 0.2) * 1e-3))
        if all(p is None for p in plans):
            continue
        costs = [cost] * 4
        one = lockstep_step_times(plans, costs, 1)
        # the array form: each rank's step plus its MoE re-pricing, then the slowest
        total = sum(int(p.new_tokens.sum()) for p in plans if p is not None)
        rows = []
        for p in plans:
            if p is None:
                continue
            times = np.array(p.step_times_s[:1])
            own = cost.expert_parallel.token_ranks * int(p.new_tokens.sum())
            times += cost.model.n_layers * (cost.moe_group_layer_s(total) - cost.moe_group_layer_s(own))
            times[0] += p.transfer_s
            rows.append(times)
        assert one.tobytes() == np.maximum.reduce(rows).tobytes()


def _outputs(cfg: EngineConfig, workload) -> tuple:
    result = simulate(cfg, workload)
    summary = {k: v for k, v in summarize(result).items() if k != "wall_time_s"}
    return summary, requests_frame(result), result.recorder.steps_frame()


def test_lockstep_runs_with_and_without_the_memo_are_identical(monkeypatch):
    workload = load_run_workload("splitwise_conv", max_requests=150, qps=6.0, seed=0)
    cfgs = [EngineConfig(model="qwen3-30b-a3b", hardware="h100-sxm", policy="chunked", tp=4, dp=4,
                         enable_dp_attention=True, ep=4, record_steps=True),
            EngineConfig.model_validate({"model": "qwen3-30b-a3b", "policy": "chunked", "prefill_replicas": 1,
                                         "decode_replicas": 1, "record_steps": True,
                                         "decode": {"dp": 4, "enable_expert_parallel": True}})]
    hits = []
    priced_ahead = DecodeRuns._priced_ahead

    def counted(self, contexts):
        ahead = priced_ahead(self, contexts)
        hits.append(ahead is not None)
        return ahead

    monkeypatch.setattr(DecodeRuns, "_priced_ahead", counted)
    with_memo = [_outputs(cfg, workload) for cfg in cfgs]
    assert sum(hits) > 100  # the memo really answered
    import sim.engine.sched.base as base

    monkeypatch.setattr(base, "runs_are_elementwise", lambda cost: False)
    without = [_outputs(cfg, workload) for cfg in cfgs]
    for (summary, requests, steps), (summary_0, requests_0, steps_0) in zip(with_memo, without, strict=True):
        assert summary == summary_0
        assert requests.equals(requests_0) and steps.equals(steps_0)



@pytest.mark.parametrize("knobs", [
    dict(model="qwen3-30b-a3b", hardware="h100-sxm", tp=4, dp=4, enable_dp_attention=True, ep=4),
    dict(model="llama-3-8b", hardware="a100-80g-sxm", num_gpu_blocks_override=500)])
def test_one_step_runs_recorded_on_floats_equal_the_array_record(knobs, monkeypatch):
    """Without a steps table a one-step decode run is recorded on Python floats
    (`Recorder._one_step_run`); each such run, recorded afresh both ways, adds the same busy time,
    KV utilisation and fragmentation as the array path (with a steps table) adds, bit for bit."""
    from sim.engine.metrics import Recorder

    record_run, compared = Recorder.run, []

    def both_ways(self, sched, start_s, plan):
        if plan.n_steps == 1 and not self.record_steps:
            fast, arrays = Recorder(False), Recorder(True)
            record_run(fast, sched, start_s, plan)
            record_run(arrays, sched, start_s, plan)
            compared.append([(r.busy_s, r._kv_util_time, r._kv_waste_time, r.n_steps) for r in (fast, arrays)])
        return record_run(self, sched, start_s, plan)

    monkeypatch.setattr(Recorder, "run", both_ways)
    workload = load_run_workload("splitwise_conv", max_requests=200, qps=10.0, seed=0)
    simulate(EngineConfig(policy="chunked", **knobs), workload, core="engine")
    assert len(compared) > 20 and any(fast[2] > 0 for fast, _ in compared)
    assert all(fast == arrays for fast, arrays in compared)


def test_deferred_run_blocks_equal_taking_them_all_then_giving_back(monkeypatch):
    """A lockstep rank takes its decode run's blocks once its group knows how many steps run
    (`take_run_blocks`); taking all of them and cutting the run (`truncate_run`) gives the same run."""
    workload = load_run_workload("splitwise_conv", max_requests=150, qps=6.0, seed=0)
    cfg = EngineConfig(model="qwen3-30b-a3b", hardware="h100-sxm", policy="chunked", tp=4, dp=4,
                       enable_dp_attention=True, ep=4, record_steps=True)
    deferred = _outputs(cfg, workload)
    n_cut = []

    def take_all_then_cut(self, plan, n_steps):
        ids, contexts, n_grown = plan.blocks_to_take
        plan.blocks_to_take = None
        self._grow_run(ids, contexts, plan.n_steps, n_grown)
        if n_steps < plan.n_steps:
            n_cut.append(n_steps)
            self.truncate_run(plan, n_steps)

    monkeypatch.setattr(DecodeRuns, "take_run_blocks", take_all_then_cut)
    eager = _outputs(cfg, workload)
    assert len(n_cut) > 50  # runs really were cut
    assert deferred[0] == eager[0]
    assert deferred[1].equals(eager[1]) and deferred[2].equals(eager[2])
