"""Pipeline stages of an EP / DP-attention replica (sim/cost/pipeline_ep.py): the pipeline formula of
sim/cost/pipeline.py over one attention rank's expert-parallel cost."""

from __future__ import annotations

import numpy as np
import pytest

from sim.cost.collectives import link_time_s
from sim.cost.expert_parallel import ExpertParallelCostModel, ExpertParallelism
from sim.cost.pipeline_ep import PipelineExpertParallelCostModel
from sim.cost.replica import replica_cost_model
from sim.inputs.config import EngineConfig
from sim.inputs.hardware import load_hardware
from sim.inputs.layout.checks import simulated_layout
from sim.inputs.layout.parallel import ReplicaLayout
from sim.inputs.model import load_model
from sim.inputs.workload.trace import Trace
from sim.run.simulate import simulate
from sim.run.summary import summarize

QWEN30 = load_model("qwen3-30b-a3b")
H100 = load_hardware("h100-sxm")
ARGS = ("bf16", "bf16", 16)


def _pair(layout_pp: ReplicaLayout, hw=H100, model=QWEN30):
    """(the staged rank's cost, the same rank's EP cost with all layers on one stage)."""
    one_stage = ReplicaLayout(tp=layout_pp.tp, dp=layout_pp.dp, ep=layout_pp.ep,
                              enable_dp_attention=layout_pp.enable_dp_attention)
    staged = replica_cost_model(model, hw, layout_pp.tp, *ARGS, pp=layout_pp.pp, layout=layout_pp,
                                expert_parallel=ExpertParallelism.of(layout_pp))
    flat = ExpertParallelCostModel(model, hw, one_stage, *ARGS, expert_parallel=ExpertParallelism.of(one_stage))
    return staged, flat


def test_a_staged_rank_step_is_the_pipeline_formula_over_its_ep_cost():
    layout = ReplicaLayout(tp=2, dp=2, ep=2, enable_dp_attention=True, pp=2)
    staged, flat = _pair(layout)
    assert isinstance(staged, PipelineExpertParallelCostModel)
    n, context = 64, 1500
    step = staged.step_time_s(np.ones(n, np.int64), np.full(n, context), n)
    # two micro-batches of 32 sequences, each over all layers at the EP price (its MoE on both ranks' tokens)
    forward = flat.step_time_s(np.ones(n // 2, np.int64), np.full(n // 2, context), n // 2) - flat.overhead_s
    lm = flat.lm_head_time_s(n // 2)
    busy = 2 * (staged.stage_share * (forward - lm) + lm)
    hop = sum(float(link_time_s(np.array([n // 2 * staged.hop_bytes_per_token]), fit)[0]) for fit in staged.hop_links)
    expected = max(busy, forward + hop) + staged.overhead_s
    assert step == pytest.approx(expected, rel=1e-9)
    assert staged.stage_share == 0.5  # 48 layers over 2 stages
    # each GPU does half the layers for the rank's batch: shorter than the one-stage step
    assert step < flat.step_time_s(np.ones(n, np.int64), np.full(n, context), n)


def test_stage_hops_leave_the_node_when_the_stage_fills_it():
    # 8-GPU stages of DP-attention ranks (attention TP 1): the hop from GPU 7 to GPU 8 leaves the HGX board
    layout = ReplicaLayout(tp=8, dp=8, ep=8, enable_dp_attention=True, pp=2)
    staged, _ = _pair(layout)
    assert staged.tp == 1 and staged.hop_kinds == ["network"]
    small = ReplicaLayout(tp=2, dp=2, ep=2, enable_dp_attention=True, pp=2)
    assert _pair(small)[0].hop_kinds == ["nvlink"]


def test_lockstep_moe_correction_is_the_busiest_stages_over_pp_micro_batches():
    layout = ReplicaLayout(tp=2, dp=2, ep=2, enable_dp_attention=True, pp=2)
    staged, flat = _pair(layout)
    for tokens in (64, 301, 2048):
        expected = 2 * 0.5 * flat.moe_group_layer_s(int(round(tokens / 2)))
        assert staged.moe_group_layer_s(tokens) == pytest.approx(expected, rel=1e-12)


def test_pp_with_dp_attention_simulates_and_is_deterministic():
    cfg = EngineConfig(model="qwen3-30b-a3b", hardware="h100-sxm", tp=2, dp=2, enable_dp_attention=True, ep=2, pp=2,
                       max_num_seqs=64, policy="chunked")
    assert simulated_layout(cfg, QWEN30).pp == 2
    n = 40
    trace = Trace(np.zeros(n), np.full(n, 256), np.full(n, 32), source="test")
    first, second = summarize(simulate(cfg, trace)), summarize(simulate(cfg, trace))
    assert first["n_finished"] == n and first["output_throughput_tok_s"] > 0
    assert first["output_throughput_tok_s"] == second["output_throughput_tok_s"]
