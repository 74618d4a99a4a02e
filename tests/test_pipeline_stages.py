"""The busiest pipeline stage of a model whose layers differ (dense-first-k MoE, interleaved MoE,
per-layer attention kinds), and per-group checkpoint dtypes under PP (sim/inputs/layout/layout_memory.py)."""

from __future__ import annotations

from sim.inputs.hardware import load_hardware
from sim.inputs.layout.layout_memory import plan_layout_memory, stage_layer_ranges, stage_model
from sim.inputs.layout.parallel import ReplicaLayout
from sim.inputs.model import load_model
from sim.inputs.model.weights import weight_bytes_by_group


def test_stage_ranges_cover_every_layer_once_with_the_remainder_before_the_last_stage():
    ranges = stage_layer_ranges(61, 2)
    assert [len(r) for r in ranges] == [31, 30]
    assert [i for r in ranges for i in r] == list(range(61))
    assert [len(r) for r in stage_layer_ranges(10, 4)] == [2, 3, 3, 2]


def test_the_busiest_stage_keeps_its_own_dense_layers_and_attention_kinds():
    maverick = load_model("llama-4-maverick")  # MoE on every other layer, 3 chunked : 1 full attention
    stage = stage_model(maverick, ReplicaLayout(tp=8, pp=2))
    assert stage.n_layers == 24 and stage.n_moe_layers == 12  # was 0: the dense list was not re-indexed
    assert stage.layer_attention == maverick.layer_attention[:24]
    deepseek = load_model("deepseek-r1")  # 3 dense layers first
    assert stage_model(deepseek, ReplicaLayout(tp=8, pp=2)).n_moe_layers == 28


def test_pp_takes_the_checkpoints_per_group_dtypes():
    deepseek, h200 = load_model("deepseek-r1"), load_hardware("h200")
    two_stages = plan_layout_memory(deepseek, h200, ReplicaLayout(tp=8, pp=2), weight_dtype="auto")
    one_stage = plan_layout_memory(deepseek, h200, ReplicaLayout(tp=8), weight_dtype="auto")
    # 31 of 61 layers (28 MoE of 58) on the busiest stage, one vocab table of two
    assert 0.47 < two_stages.weight_bytes_per_gpu / one_stage.weight_bytes_per_gpu < 0.50


def test_a_layouts_weight_groups_are_its_own_and_sum_to_its_total():
    deepseek, h200 = load_model("deepseek-v3"), load_hardware("h200")
    wide = plan_layout_memory(deepseek, h200, ReplicaLayout(tp=8, dp=8, enable_dp_attention=True, ep=8),
                              weight_dtype="auto")
    plain = plan_layout_memory(deepseek, h200, ReplicaLayout(tp=8), weight_dtype="auto")
    groups = wide.weight_bytes_per_gpu_by_group
    assert sum(groups.values()) == wide.weight_bytes_per_gpu
    # attention is replicated over the 8 DP ranks (TP 1 each), the experts spread over all 8 GPUs
    assert groups["experts"] == plain.weight_bytes_per_gpu_by_group["experts"]
    assert groups["attention"] == weight_bytes_by_group(deepseek, 1, "auto")["attention"]
    assert groups["attention"] > plain.weight_bytes_per_gpu_by_group["attention"]
