"""Pipeline parallelism: Llama-3.1-405B on two 8-GPU H100 nodes, TP8 x PP2 against TP16 across nodes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sim.cost import CostModel
from sim.cost.pipeline import PipelineCostModel
from sim.cost.replica import replica_cost_model
from sim.errors import InputError
from sim.inputs.config import load_config
from sim.inputs.hardware import load_hardware
from sim.inputs.layout.layout_memory import plan_layout_memory
from sim.inputs.layout.memory import plan_memory
from sim.inputs.layout.parallel import ReplicaLayout
from sim.inputs.model import load_model
from sim.inputs.model.params import attention_params


@pytest.fixture(scope="module")
def llama405():
    return load_model("llama-3.1-405b"), load_hardware("h100-sxm")


def _forward_s(cost: CostModel, q, c, sampled) -> tuple[float, float]:
    """(forward over all layers and the LM head, LM head) of one micro-batch on the stage's TP group."""
    return cost.step_time_s(np.array(q), np.array(c), sampled) - cost.overhead_s, cost.lm_head_time_s(sampled)


def test_a_lone_prefill_on_two_stages_idles_half_the_pipeline(llama405):
    model, hw = llama405
    pp = PipelineCostModel(model, hw, 8, pp=2)
    assert pp.hop_kinds == ["network"]  # stage 0 on node 0, stage 1 on node 1
    forward, lm = _forward_s(CostModel(model, hw, 8), [4096], [0], 1)
    stage = 63 / 126 * (forward - lm) + lm  # the last stage: half the layers and the LM head
    hop = 10e-6 + 4096 * 2 * model.hidden_size * 2 / 8 / 50e9  # hidden + residual, 1/8 per rank, over the NIC
    step = pp.breakdown([4096], [0], n_sampled=1)
    ops = {op.name: op for op in step.ops}
    assert ops["pp_bubble"].time_s == pytest.approx(forward - stage, rel=1e-9)
    assert ops["pp_send_recv"].time_s == pytest.approx(hop, rel=1e-9)
    assert step.time_s == pytest.approx(forward + hop + pp.overhead_s, rel=1e-9)
    assert step.time_s == pytest.approx(pp.step_time_s(np.array([4096]), np.array([0]), 1), rel=1e-12)
    # the bubble is a visible share of the step: about (pp - 1) / pp of the stage work
    assert 0.45 < ops["pp_bubble"].time_s / step.time_s < 0.5


def test_a_full_pipeline_has_no_bubble_and_costs_one_half_batch_pass(llama405):
    model, hw = llama405
    pp, tp8 = PipelineCostModel(model, hw, 8, pp=2), CostModel(model, hw, 8)
    q, c = [1] * 64, [2048] * 64
    halves = [_forward_s(tp8, q[k::2], c[k::2], 32) for k in (0, 1)]
    busy = sum(63 / 126 * (f - lm) + lm for f, lm in halves)
    hop = 10e-6 + 32 * 2 * model.hidden_size * 2 / 8 / 50e9
    by_hand = max(busy, max(f for f, _ in halves) + hop) + pp.overhead_s
    step = pp.breakdown(q, c)
    assert {op.name: op.time_s for op in step.ops}["pp_bubble"] == 0.0
    assert step.time_s == pytest.approx(by_hand, rel=1e-9)
    assert pp.step_time_s(np.array(q), np.array(c), 64) == pytest.approx(by_hand, rel=1e-9)
    times, kv = pp.decode_run(np.array(c), 3)
    assert times[0] == pytest.approx(by_hand, rel=1e-9)
    assert kv[0] == 64 * -(-2049 // 16) * 16  # whole blocks of every sequence, both micro-batches


def test_tp8_pp2_against_tp16_across_nodes(llama405):
    """TP16 pays the scale-out all-reduce twice per layer; TP8 x PP2 one NIC hop per micro-batch
    but reads each stage's weights once per micro-batch. Both show their cross-node cost as ops."""
    model, hw = llama405
    tp16, pp = CostModel(model, hw, 16), PipelineCostModel(model, hw, 8, pp=2)
    q, c = [1] * 64, [2048] * 64
    tp16_ops = {op.name: op for op in tp16.breakdown(q, c).ops}
    pp_ops = {op.name: op for op in pp.breakdown(q, c).ops}
    assert tp16_ops["allreduce_scale_out"].time_s * model.n_layers > 1e-3  # milliseconds per decode step
    assert "allreduce_scale_out" not in pp_ops and "pp_send_recv" in pp_ops
    # a lone prefill: TP16 (all 16 GPUs busy) beats two stages of which one idles
    prefill16 = tp16.step_time_s(np.array([4096]), np.array([0]), 1)
    prefill_pp = pp.step_time_s(np.array([4096]), np.array([0]), 1)
    assert prefill16 < prefill_pp


def test_pp_memory_holds_each_stages_layers_and_their_kv(llama405):
    model, hw = llama405
    with pytest.raises(InputError, match="does not fit"):
        plan_memory(model, hw, 8)
    two = plan_layout_memory(model, hw, ReplicaLayout(tp=8, pp=2))
    tp16 = plan_memory(model, hw, 16)
    assert two.kv_bytes_per_token_per_gpu == 63 * 2 * 1 * model.head_dim * 2  # 63 layers, one KV head per GPU
    # TP16 replicates the 8 KV heads (one per GPU over 126 layers): PP2 holds twice the tokens per GPU
    assert tp16.kv_bytes_per_token_per_gpu == 2 * two.kv_bytes_per_token_per_gpu
    # the busiest stage holds 63 layers and one vocab table, each TP8-sharded (bf16: 2 bytes)
    layer = attention_params(model) + model.expert_params
    assert two.weight_bytes_per_gpu == 2 * (63 * layer // 8 + -(-model.vocab_size * model.hidden_size // 8))


def test_pp_config_names_and_refusals(llama405):
    model, hw = llama405
    cfg = load_config(None, {"model": "llama-3.1-405b", "tp": 8, "pipeline_parallel_size": 2})
    assert cfg.pp == 2 and cfg.layout().n_gpus == 16
    assert load_config(None, {"pp_size": 3}).pp == 3
    with pytest.raises(InputError, match="name the same knob"):
        load_config(None, {"pp": 2, "pipeline_parallel_size": 4})
    with pytest.raises(InputError, match="layers"):
        replica_cost_model(model, hw, 8, pp=200)
    assert type(replica_cost_model(model, hw, 8)) is CostModel  # pp 1: the dense paths, unchanged


def test_simulate_runs_a_pipelined_replica_and_refuses_ep_on_a_dense_model():
    from typer.testing import CliRunner

    from sim.cli import app

    runner = CliRunner()
    args = ["simulate", "-m", "llama-3.1-405b", "--qps", "2", "--max-requests", "40", "--json"]
    pp = runner.invoke(app, [*args, "--tp", "8", "--pp", "2"])
    assert pp.exit_code == 0, pp.output
    summary = json.loads(pp.output)
    assert summary["n_finished"] == 40
    assert summary["num_gpu_blocks"] == plan_layout_memory(load_model("llama-3.1-405b"), load_hardware("h100-sxm"),
                                                           ReplicaLayout(tp=8, pp=2)).num_gpu_blocks
    dense_ep = runner.invoke(app, ["simulate", "-m", "llama-3-8b", "--ep", "2", "--max-requests", "5"])
    assert dense_ep.exit_code == 2
    assert "no experts to shard" in dense_ep.output and "Traceback" not in dense_ep.output


def test_roofline_shows_the_pipeline_and_scale_out_ops_with_their_bound():
    from typer.testing import CliRunner

    from sim.cli import app

    runner = CliRunner()
    base = ["roofline", "-m", "llama-3.1-405b", "-H", "h100-sxm", "--batch", "64", "--json"]
    pp = json.loads(runner.invoke(app, [*base, "--tp", "8", "--pp", "2"]).output)
    ops = {op["name"]: op for op in pp["prefill"]["ops"]}
    assert ops["pp_send_recv"]["bound"] == "network" and ops["pp_send_recv"]["time_s"] > 0
    assert ops["pp_bubble"]["bound"] == "bubble" and ops["pp_bubble"]["time_s"] > 0.3 * pp["prefill"]["time_s"]
    assert sum(op["time_s"] for op in pp["decode"]["ops"]) + pp["decode"]["overhead_s"] == pytest.approx(
        pp["decode"]["time_s"])
    tp16 = json.loads(runner.invoke(app, [*base, "--tp", "16"]).output)
    scale_out = {op["name"]: op for op in tp16["decode"]["ops"]}["allreduce_scale_out"]
    assert scale_out["bound"] == "network" and scale_out["time_s"] > 1e-3
