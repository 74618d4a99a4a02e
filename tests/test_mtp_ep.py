"""MTP speculative decoding on an expert-parallel replica with one attention rank (SGLang
`--tp 8 --ep 8 --speculative-algorithm NEXTN`): the MTP module's MoE layer is priced expert-parallel
like the target's (sim/cost/mtp.py); with data-parallel attention it stays refused."""

from __future__ import annotations

import numpy as np
import pytest

from sim.config import EngineConfig
from sim.cost.expert_parallel import ExpertParallelCostModel, ExpertParallelism
from sim.cost.mtp import MTPDraft
from sim.errors import InputError
from sim.hardware import load_hardware
from sim.layout import ReplicaLayout
from sim.layout_config import simulated_layout
from sim.model import load_model
from sim.simulate import simulate
from sim.summary import summarize
from sim.trace import Trace

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


def test_mtp_with_dp_attention_stays_refused():
    cfg = EngineConfig(model="deepseek-v3", hardware="h200", tp=8, dp=8, enable_dp_attention=True, ep=8,
                       spec_tokens=1, spec_method="mtp", policy="chunked")
    with pytest.raises(InputError, match="data-parallel attention"):
        simulated_layout(cfg, DSV3)
