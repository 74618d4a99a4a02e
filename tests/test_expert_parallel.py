"""Expert parallelism and data-parallel attention in the cost model and the simulator
(sim/cost/expert_parallel.py, docs/parallelism.md)."""

import numpy as np
import pytest

from sim.cost.all_to_all import a2a_payload_bytes, all_to_all_time_s
from sim.cost.expert_parallel import ExpertParallelCostModel, ExpertParallelism, expert_parallelism_of
from sim.cost.model import CostModel
from sim.cost.replica import replica_cost_model
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
H200 = load_hardware("h200")


def _cost(layout: ReplicaLayout, model=DSV3, hw=H200, **knobs) -> ExpertParallelCostModel:
    return ExpertParallelCostModel(model, hw, layout, "auto", "bf16", 16,
                                   expert_parallel=ExpertParallelism.of(layout, **knobs))


def _ops(step) -> dict:
    return {op.name: op for op in step.ops}


DP8 = ReplicaLayout(tp=8, dp=8, ep=8, enable_dp_attention=True)


def test_dp_attention_rank_prices_attention_alone_and_experts_on_all_ranks_tokens():
    cost = _cost(DP8)
    assert cost.tp == 1  # each DP rank's attention on its own GPU
    step = cost.breakdown([1] * 64, [2000] * 64)
    ops = _ops(step)
    assert "allreduce" not in ops  # attention TP 1: nothing to all-reduce
    for name in ("moe_dispatch", "moe_combine"):
        assert ops[name].bound == "network" and ops[name].time_s > 0
    share = DSV3.n_moe_layers / DSV3.n_layers
    # 8 ranks x 64 tokens = 512 MoE tokens: all 32 of the GPU's 256 / 8 experts are touched
    expert_bytes = 32 * DSV3.expert_params * 1.0  # fp8 experts
    assert ops["moe_mlp"].bytes / share == pytest.approx(expert_bytes, rel=0.05)
    # dispatch payload: 512 tokens / 8 GPUs x top-8 x (7168 fp8 + 56 scales x 4 B)
    payload = a2a_payload_bytes(64, 8, 7168, 1.0, 7168 / 128 * 4)
    assert ops["moe_dispatch"].bytes / share == pytest.approx(float(payload))
    assert step.time_s == pytest.approx(cost.step_time_s(np.ones(64, np.int64), np.full(64, 2000), 64), rel=1e-12)


def test_experts_touched_per_gpu_follow_the_moe_tokens():
    cost = _cost(DP8)
    one = _ops(cost.breakdown([1], [100]))["moe_mlp"]  # 8 tokens meet in the MoE layer
    many = _ops(cost.breakdown([1] * 256, [100] * 256))["moe_mlp"]
    share = DSV3.n_moe_layers / DSV3.n_layers
    touched_one = 32 * (1 - (1 - 8 / 256) ** 8)
    assert one.bytes / share == pytest.approx(touched_one * DSV3.expert_params, rel=0.02)
    assert many.bytes > 4 * one.bytes  # ~6.9 of 32 experts against all 32


def test_load_imbalance_stretches_experts_and_all_to_all():
    even, skewed = _cost(DP8), _cost(DP8, load_imbalance=1.18)
    a, b = _ops(even.breakdown([2048], [0])), _ops(skewed.breakdown([2048], [0]))
    assert b["moe_mlp"].time_s > 1.1 * a["moe_mlp"].time_s
    assert b["moe_dispatch"].bytes == pytest.approx(1.18 * a["moe_dispatch"].bytes, rel=1e-12)
    assert b["moe_dispatch"].time_s > 1.15 * a["moe_dispatch"].time_s  # the latency term is not stretched
    assert b["q_a_proj"].time_s == a["q_a_proj"].time_s
    with pytest.raises(InputError, match="moe_load_imbalance"):
        ExpertParallelism.of(DP8, load_imbalance=0.5)


def test_all_to_all_leaves_the_domain_past_eight_gpus():
    inside = _cost(DP8)
    across = _cost(ReplicaLayout(tp=16, dp=16, ep=16, enable_dp_attention=True))
    a = _ops(inside.breakdown([1] * 64, [1000] * 64))["moe_dispatch"]
    b = _ops(across.breakdown([1] * 64, [1000] * 64))["moe_dispatch"]
    assert b.bytes == a.bytes  # each GPU dispatches its own rank's tokens either way
    assert b.time_s > 2 * a.time_s  # half its peers behind the NIC (50 GB/s) against NVLink


def test_deepep_backends_use_the_profiles_fits_or_refuse():
    ll = _cost(DP8, backend="deepep", deepep_mode="low_latency")
    op = _ops(ll.breakdown([1] * 16, [500] * 16))["moe_dispatch"]
    share = DSV3.n_moe_layers / DSV3.n_layers
    expected = all_to_all_time_s(H200, 8, op.bytes / share, "deepep_low_latency", "dispatch")
    assert op.time_s / share == pytest.approx(float(expected))
    with pytest.raises(InputError, match="deepep_normal"):  # H200 has no intra-domain normal-kernel fit
        _cost(DP8, backend="deepep", deepep_mode="auto")
    with pytest.raises(InputError, match="--moe-a2a-backend"):
        ExpertParallelism.of(DP8, backend="pplx")


def test_partial_expert_parallelism_is_refused():
    with pytest.raises(InputError, match="part of the MoE layer"):
        ExpertParallelism.of(ReplicaLayout(tp=8, dp=8, ep=4, enable_dp_attention=True))


def test_plain_tp_cost_models_are_untouched():
    cfg = EngineConfig(model="deepseek-v3", hardware="h200", tp=8, weight_dtype="auto")
    layout = cfg.layout()
    assert expert_parallelism_of(cfg, DSV3, layout) is None
    plain = replica_cost_model(DSV3, H200, 8, "auto", "bf16", 16, layout=layout, expert_parallel=None)
    assert type(plain) is CostModel


def _run(**knobs):
    cfg = EngineConfig(model="deepseek-v3", hardware="h200", weight_dtype="auto", max_num_seqs=64, **knobs)
    n = 96
    return simulate(cfg, Trace(np.zeros(n), np.full(n, 600), np.full(n, 40)))


def test_dp_attention_replica_runs_one_scheduler_per_rank_each_with_its_own_kv():
    result = _run(tp=8, dp=8, enable_dp_attention=True, ep=8)
    assert len(result.replicas) == 8
    blocks = result.num_gpu_blocks_per_replica
    assert len(blocks) == 8 and len(set(blocks)) == 1
    tp8 = _run(tp=8)
    assert blocks[0] < tp8.num_gpu_blocks * 2  # one rank's KV: its GPU holds a whole latent per token
    summary = summarize(result)
    assert summary["output_throughput_tok_s"] > 0
    again = summarize(_run(tp=8, dp=8, enable_dp_attention=True, ep=8))
    assert again["output_throughput_tok_s"] == summary["output_throughput_tok_s"]


def test_layouts_not_simulated_are_refused_by_name():
    cfg = EngineConfig(model="deepseek-v3", hardware="h200", tp=8, dp=8, enable_dp_attention=True)
    with pytest.raises(InputError, match="without expert parallelism"):
        simulated_layout(cfg, DSV3)
    cfg = EngineConfig(model="deepseek-v3", hardware="h200", tp=8, ep=8, pp=2)
    assert simulated_layout(cfg, DSV3).pp == 2  # staged EP: sim/cost/pipeline_ep.py, tests/test_pipeline_ep.py
    cfg = EngineConfig(model="deepseek-v3", hardware="h200", tp=8, ep=8, pp=2, spec_tokens=2, policy="chunked")
    with pytest.raises(InputError, match="speculative"):  # EP / DP-attention speculate: tests/test_mtp_ep.py
        simulated_layout(cfg, DSV3)


def test_two_batch_overlap_hides_the_all_to_all_behind_compute():
    ep32 = ReplicaLayout(tp=32, dp=32, ep=32, enable_dp_attention=True)
    h100 = load_hardware("h100-sxm")
    plain = _cost(ep32, hw=h100, backend="deepep", deepep_mode="normal")
    tbo = _cost(ep32, hw=h100, backend="deepep", deepep_mode="normal", two_batch_overlap=True)
    a, b = _ops(plain.breakdown([4096], [0])), _ops(tbo.breakdown([4096], [0]))
    comm_a = a["moe_dispatch"].time_s + a["moe_combine"].time_s
    comm_b = sum(b[name].time_s for name in ("moe_dispatch", "moe_combine") if name in b)  # 0: hidden, dropped
    compute = sum(op.time_s for name, op in a.items()
                  if op.per_layer and name not in ("moe_dispatch", "moe_combine") and "attention" not in name)
    assert comm_b == pytest.approx(max(comm_a - compute, 0.0), rel=1e-9, abs=1e-15)
    assert comm_a > 0 and comm_b < comm_a
    assert tbo.breakdown([4096], [0]).time_s < plain.breakdown([4096], [0]).time_s


def test_all_to_all_knobs_without_expert_parallelism_are_refused():
    for knobs, flag in (({"moe_a2a_backend": "deepep"}, "--moe-a2a-backend"),
                        ({"moe_load_imbalance": 1.2}, "--moe-load-imbalance"),
                        ({"enable_two_batch_overlap": True}, "--enable-two-batch-overlap")):
        cfg = EngineConfig(model="deepseek-v3", hardware="h200", tp=8, **knobs)
        with pytest.raises(InputError, match=flag):
            simulated_layout(cfg, DSV3)
    cfg = EngineConfig(model="deepseek-v3", hardware="h200", tp=8, ep=8, deepep_mode="normal")
    with pytest.raises(InputError, match="needs --moe-a2a-backend deepep"):
        simulated_layout(cfg, DSV3)
