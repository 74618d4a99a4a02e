"""TensorRT-LLM's attention-DP MoE communication (all-gather + reduce-scatter, `allgather_reducescatter`) and
the expert-parallel grouped GEMM's own compute ramp (`gemm_half_tokens_by_op.experts_ep`); issue 24."""

import numpy as np
import pytest
from pydantic import ValidationError

from sim.cost.all_to_all import allgather_reducescatter_time_s
from sim.cost.collectives import allreduce_fit, link_time_s
from sim.cost.expert_parallel import ExpertParallelCostModel, ExpertParallelism
from sim.cost.roofline import gemm_compute_efficiency
from sim.errors import InputError
from sim.inputs.efficiency import Efficiency
from sim.inputs.hardware import load_hardware
from sim.inputs.layout.parallel import ReplicaLayout
from sim.inputs.model import load_model
from sim.validate.cases import bundled_case_files, load_cases
from sim.validate.run import case_config

H200 = load_hardware("h200")
MAVERICK = load_model("llama-4-maverick")
QWEN = load_model("qwen3-235b-a22b")
DP8 = ReplicaLayout(tp=8, dp=8, ep=8, enable_dp_attention=True)


def _cost(model, backend: str, hw=H200, layout=DP8) -> ExpertParallelCostModel:
    return ExpertParallelCostModel(model, hw, layout, "fp8", "fp8", 32,
                                   expert_parallel=ExpertParallelism.of(layout, backend=backend))


def _op(cost, name: str, batch: int = 64):
    return next(op for op in cost.breakdown([1] * batch, [1000] * batch).ops if op.name == name)


def test_allgather_and_reduce_scatter_are_half_an_all_reduce_of_the_buffer():
    buffer = np.array([0.0, 1e6, 3e7])
    fit = allreduce_fit(H200, 8, "nccl")
    assert np.allclose(allgather_reducescatter_time_s(H200, 8, buffer, "dispatch"), 0.5 * link_time_s(buffer, fit))
    assert allgather_reducescatter_time_s(H200, 8, buffer)[0] == 0.0
    with pytest.raises(InputError, match="scale-up domain"):
        allgather_reducescatter_time_s(H200, 16, buffer)


def test_allgather_moves_the_whole_moe_batch_whatever_the_top_k():
    """Llama-4 Maverick routes top-1 over 8 GPUs: an all-gather carries 8x an all-to-all's tokens;
    Qwen3's top-8 over 8 GPUs carries as many (the buffer adds each token's expert ids and weights)."""
    share = MAVERICK.n_moe_layers / MAVERICK.n_layers
    gathered, a2a = _op(_cost(MAVERICK, "allgather_reducescatter"), "moe_dispatch"), \
        _op(_cost(MAVERICK, "nccl"), "moe_dispatch")
    scale_bytes = MAVERICK.hidden_size / 128 * 4
    assert gathered.bytes / share == pytest.approx(8 * 64 * (MAVERICK.hidden_size + scale_bytes + 8))
    assert gathered.bytes == pytest.approx(8 * a2a.bytes, rel=0.01)
    assert gathered.time_s > 2 * a2a.time_s
    combine = _op(_cost(MAVERICK, "allgather_reducescatter"), "moe_combine")
    assert combine.bytes / share == pytest.approx(8 * 64 * MAVERICK.hidden_size * 2)  # bf16 partial outputs
    q_gathered, q_a2a = _op(_cost(QWEN, "allgather_reducescatter"), "moe_dispatch"), _op(_cost(QWEN, "nccl"),
                                                                                          "moe_dispatch")
    assert q_gathered.bytes == pytest.approx(q_a2a.bytes, rel=0.02)


def test_trtllm_attention_dp_rows_use_allgather_reducescatter():
    path = next(p for p in bundled_case_files() if p.name == "trtllm_perf_overview_moe_v1.0.csv")
    row = next(c for c in load_cases([path]) if c.tp == 8 and c.gpu == "H100")
    assert case_config(row).moe_a2a_backend == "allgather_reducescatter"


def test_experts_ep_half_point_is_its_own_and_prices_padding_per_touched_expert():
    by_op = {**H200.efficiency.gemm_compute_max_by_op, "experts_ep": 0.6}
    eff = H200.efficiency.model_copy(update={"gemm_compute_max_by_op": by_op,
                                             "gemm_half_tokens_by_op": {"experts_ep": 200.0}})
    m = np.array([10.0, 200.0, 1e6])
    assert np.allclose(gemm_compute_efficiency(m, eff, op="experts_ep"), 0.6 * m / (m + 200.0))
    dense = gemm_compute_efficiency(m, eff, op="qkv_proj")  # other classes keep gemm_half_tokens
    assert np.allclose(dense, H200.efficiency.gemm_compute_max_by_op["qkv_proj"] * m / (m + eff.gemm_half_tokens))
    # compute time ~ (pairs + half x experts): the half point is a fixed cost per touched expert
    hw = H200.model_copy(update={"efficiency": eff})
    cost = _cost(QWEN, "allgather_reducescatter", hw=hw)
    small, large = (_op(cost, "moe_mlp", b) for b in (256, 512))  # 2048 / 4096 MoE tokens: all experts touched
    t_pair = (large.time_s - small.time_s) / 256
    padding_s = 16 * 200.0 * 2 * QWEN.expert_params / (hw.compute.dense_fp8_tflops * 1e12 * 0.6)
    launches_s = 3 * eff.kernel_launch_us * 1e-6  # the grouped GEMMs' and activation's kernels
    assert small.time_s - 256 * t_pair == pytest.approx(padding_s + launches_s, rel=1e-6)


def test_bad_half_points_are_refused():
    base = H200.efficiency.model_dump()
    for table, match in (({"experts_epp": 10.0}, "unknown GEMM op class"), ({"experts_ep": -1.0}, ">= 0")):
        with pytest.raises(ValidationError, match=match):
            Efficiency(**{**base, "gemm_half_tokens_by_op": table})


def test_deepep_experts_run_at_deepgemms_ramp_others_at_the_fitted_one():
    h100, dsv3 = load_hardware("h100-sxm"), load_model("deepseek-v3")
    layout = ReplicaLayout(tp=16, dp=16, ep=16, enable_dp_attention=True)

    def cost(**knobs):
        return ExpertParallelCostModel(dsv3, h100, layout, "fp8", "bf16", 16,
                                       expert_parallel=ExpertParallelism.of(layout, **knobs))

    deepep, nccl = cost(backend="deepep", deepep_mode="low_latency"), cost(backend="nccl")
    assert (deepep._experts_op(), nccl._experts_op()) == ("experts_deepgemm", "experts_ep")
    eff = h100.efficiency
    rows = 4096.0  # prefill: M per expert far above both half points, compute-bound either way
    e_deepgemm = gemm_compute_efficiency(rows, eff, op="experts_deepgemm")
    e_fitted = gemm_compute_efficiency(rows, eff, op="experts_ep")
    assert float(e_deepgemm) == pytest.approx(0.625 * rows / (rows + 106))
    a, b = (next(op for op in c.breakdown([8192], [0]).ops if op.name == "moe_mlp") for c in (deepep, nccl))
    assert a.flops == b.flops and a.bound == b.bound == "compute"
    launches_s = 3 * eff.kernel_launch_us * 1e-6 * dsv3.n_moe_layers / dsv3.n_layers
    assert (a.time_s - launches_s) / (b.time_s - launches_s) == pytest.approx(float(e_fitted / e_deepgemm), rel=0.02)


def test_trtllm_preset_pads_to_the_perf_overview_graph_sizes():
    """The perf-overview runs pass cuda_graph_config batch_sizes 1, 2, 4, ..., 256, 384, 512, 1024, ..., 8192."""
    from sim.inputs.engines import EngineOverhead, load_engine

    overhead = EngineOverhead.from_preset(load_engine("trtllm@1.0"))
    assert [overhead.padded_size(n) for n in (200, 375, 385, 3000, 8192, 9000)] == [256, 384, 512, 4096, 8192, 9000]
