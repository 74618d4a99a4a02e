"""MTP speculative decoding on expert-parallel replicas (SGLang `--tp 8 --ep 8 --speculative-algorithm
NEXTN`, with or without `--dp 8 --enable-dp-attention`): the MTP module's MoE layer is priced
expert-parallel like the target's (sim/cost/mtp.py); ranks in lockstep count the verify tokens
(sim/engine/lockstep.py); with pipeline stages it stays refused."""

from __future__ import annotations

import numpy as np
import pytest

from sim.cost.expert_parallel import ExpertParallelCostModel, ExpertParallelism
from sim.cost.mtp import MTPDraft
from sim.errors import InputError
from sim.inputs.config import EngineConfig
from sim.inputs.hardware import load_hardware
from sim.inputs.layout.checks import simulated_layout
from sim.inputs.layout.parallel import ReplicaLayout
from sim.inputs.model import load_model
from sim.inputs.workload.trace import Trace
from sim.run.simulate import simulate
from sim.run.summary import summarize

DSV3 = load_model("deepseek-v3")
EP8 = ReplicaLayout(tp=8, ep=8)


def test_mtp_module_of_an_ep_target_is_expert_parallel_and_one_layer_deep():
    target = ExpertParallelCostModel(DSV3, load_hardware("h200"), EP8, "auto", "bf16", 16,
                                     expert_parallel=ExpertParallelism.of(EP8))
    draft = MTPDraft(target, k=1)
    assert isinstance(draft.module, ExpertParallelCostModel)
    assert draft.module.expert_parallel == target.expert_parallel and draft.module.model.n_layers == 1
    ops = {op.name for op in draft.module.breakdown([1] * 32, [2000] * 32).ops}
    assert {"moe_dispatch", "moe_combine"} <= ops  # the module's routed experts are reached by all-to-all
    contexts = np.full(32, 2000)
    step_s = target.step_time_s(np.ones(32, dtype=np.int64), contexts, 32)
    assert step_s / 61 < draft.time_s(contexts) < step_s / 10


def _run(**spec):
    cfg = EngineConfig(model="deepseek-v3", hardware="h200", tp=8, ep=8, weight_dtype="auto", policy="chunked",
                       max_num_seqs=8, **spec)
    n = 4
    trace = Trace(np.zeros(n), np.full(n, 512), np.full(n, 64), source="test")
    return summarize(simulate(cfg, trace))


def test_mtp_on_ep_speculates_and_shortens_decoding_at_a_small_batch():
    plain = _run()
    mtp = _run(spec_tokens=1, spec_method="mtp", spec_acceptance=[0.85])
    assert mtp["n_finished"] == plain["n_finished"] == 4
    assert mtp["tpot_s"]["mean"] < plain["tpot_s"]["mean"]  # ~1.85 tokens per verify step at one layer's draft
    assert mtp["tpot_s"] == _run(spec_tokens=1, spec_method="mtp", spec_acceptance=[0.85])["tpot_s"]  # seeded


def test_lockstep_ranks_count_the_verify_tokens_of_a_speculating_rank():
    """A rank verifying 8 sequences x (k+1 = 2) tokens and a rank decoding 16 sequences hold 16 MoE
    tokens each: equal batches, so the group's step is the slower rank's own time, uncorrected.
    Counting the speculating rank's 8 new tokens instead would re-price both ranks' MoE layers."""
    from sim.engine.lockstep import lockstep_step_times
    from sim.engine.sched.plan import StepPlan

    dp8 = ReplicaLayout(tp=2, dp=2, ep=2, enable_dp_attention=True)
    cost = ExpertParallelCostModel(load_model("qwen3-30b-a3b"), load_hardware("h100-sxm"), dp8, "bf16", "bf16", 16,
                                   expert_parallel=ExpertParallelism.of(dp8))
    speculating = StepPlan(np.arange(8), np.ones(8, np.int64), np.array([0.010]), moe_tokens=16)
    plain = StepPlan(np.arange(16), np.ones(16, np.int64), np.array([0.009]))
    assert lockstep_step_times([speculating, plain], [cost, cost], 1)[0] == pytest.approx(0.010, abs=1e-15)
    uncounted = StepPlan(np.arange(8), np.ones(8, np.int64), np.array([0.010]))
    assert lockstep_step_times([uncounted, plain], [cost, cost], 1)[0] != pytest.approx(0.010, abs=1e-9)


def test_mtp_with_dp_attention_runs_in_lockstep_and_shortens_decoding():
    def run(**spec):
        cfg = EngineConfig(model="deepseek-v3", hardware="h200", tp=8, dp=8, enable_dp_attention=True, ep=8,
                           weight_dtype="auto", policy="chunked", max_num_seqs=8, **spec)
        n = 16
        return summarize(simulate(cfg, Trace(np.zeros(n), np.full(n, 512), np.full(n, 64), source="test")))

    plain, mtp = run(), run(spec_tokens=1, spec_method="mtp", spec_acceptance=[0.85])
    assert mtp["n_finished"] == plain["n_finished"] == 16
    assert mtp["tpot_s"]["mean"] < plain["tpot_s"]["mean"]


def test_mtp_with_pipeline_stages_stays_refused():
    cfg = EngineConfig(model="deepseek-v3", hardware="h200", tp=8, ep=8, pp=2, spec_tokens=1, spec_method="mtp",
                       policy="chunked")
    with pytest.raises(InputError, match="pipeline stages"):
        simulated_layout(cfg, DSV3)


def test_a_steady_decode_row_with_speculation_is_not_expressed_silently():
    from sim.validate.cases import Case
    from sim.validate.run import predict

    case = Case(case_id="spec-steady", source="test", engine="sglang", model="deepseek-v3", gpu="h200", tp=8,
                weight_dtype="fp8", workload="steady_decode", num_requests=64, metric="output_throughput_tok_s",
                value=1000.0, input_len=1000, output_len=100, concurrency=8,
                engine_args={"ep": "8", "spec_tokens": "1", "spec_method": "mtp", "policy": "chunked"})
    prediction = predict(case)
    assert prediction.predicted is None and "speculative" in prediction.reason
