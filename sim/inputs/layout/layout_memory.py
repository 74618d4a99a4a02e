"""What one GPU of a laid-out replica holds (sim/inputs/layout/parallel.py): weights, KV per token, KV blocks.

- **PP**: a GPU holds its stage's layers (the busiest stage, ceil(n_layers / pp)) and their KV;
  the first stage holds the embedding, the last the LM head, so a stage holds one vocab table.
- **DP-attention / EP**: attention weights and KV split by the attention TP (each DP rank holds
  its own requests' KV: the blocks returned are one rank's); the routed experts are spread over
  the MoE layer's GPUs (tp x dp), whether by expert or tensor parallelism; redundant expert
  copies (EPLB) add r / ep experts per MoE layer to each GPU.

Plain TP (pp 1, no EP/DP) is `plan_memory` itself, unchanged.
"""

from __future__ import annotations

import math
from dataclasses import replace

from sim.inputs.dtypes import bytes_per_element
from sim.inputs.hardware import HardwareProfile
from sim.inputs.layout.memory import MemoryPlan, plan_memory, weight_elements_per_gpu
from sim.inputs.layout.parallel import ReplicaLayout
from sim.inputs.model import ModelSpec
from sim.inputs.model.params import weight_elements_by_group
from sim.inputs.model.weights import CHECKPOINT_DEFAULT, group_dtypes, uniform_dtype


def stage_layer_ranges(n_layers: int, pp: int) -> list[range]:
    """Contiguous layer ranges of `pp` stages: n // pp layers each, the remainder one more on each
    stage before the last (the last holds the LM head), as vLLM's get_pp_indices splits them."""
    sizes = [n_layers // pp] * pp
    for i in range(n_layers % pp):
        sizes[-2 - i] += 1  # remainder < pp, so these are stages 0 .. pp-2
    starts = [sum(sizes[:i]) for i in range(pp)]
    return [range(start, start + size) for start, size in zip(starts, sizes)]


def stage_model(model: ModelSpec, layout: ReplicaLayout) -> ModelSpec:
    """The model as one (the busiest) pipeline stage sees it: its layers only, with their attention
    kinds and dense/MoE MLPs. The busiest stage has the most layers, then the most MoE layers."""
    if layout.pp == 1:
        return model
    dense = set(model.moe.dense_layers) if model.moe is not None else set()
    stage = max(stage_layer_ranges(model.n_layers, layout.pp),
                key=lambda r: (len(r), sum(1 for i in r if i not in dense)))
    update: dict = {"n_layers": len(stage)}
    if model.layer_attention is not None:
        update["layer_attention"] = model.layer_attention[stage.start:stage.stop]
    if model.moe is not None:
        update["moe"] = model.moe.model_copy(update={"dense_layers": [i - stage.start for i in model.moe.dense_layers
                                                                      if i in stage]})
    return model.model_copy(update=update)


def layout_weight_elements_per_gpu(model: ModelSpec, layout: ReplicaLayout) -> int:
    """Weight elements one GPU of the busiest stage holds (module docstring)."""
    stage, attn_tp = stage_model(model, layout), layout.attention_tp
    elements = weight_elements_per_gpu(stage, attn_tp)
    if layout.pp > 1:  # one vocab table per stage, not the model's one or two
        elements += math.ceil(model.vocab_size * model.hidden_size / attn_tp) - math.ceil(model.embedding_params
                                                                                         / attn_tp)
    if model.moe is not None and layout.moe_group != attn_tp:  # the MoE layers' experts, over the MoE group
        experts = model.n_experts * model.expert_params
        elements += stage.n_moe_layers * (experts // layout.moe_group - experts // attn_tp)
    return elements + redundant_expert_elements_per_gpu(stage, layout)


def redundant_expert_elements_per_gpu(model: ModelSpec, layout: ReplicaLayout) -> int:
    """Weight elements of the redundant expert copies one EP GPU holds: r / ep slots of each MoE
    layer (SGLang `--ep-num-redundant-experts`; sim/inputs/layout/parallel.py); the MTP layer's are not counted."""
    if model.moe is None or not layout.n_redundant_experts:
        return 0
    return model.n_moe_layers * layout.n_redundant_experts * model.expert_params // layout.expert_parallel_size


def plan_layout_memory(model: ModelSpec, hw: HardwareProfile, layout: ReplicaLayout, block_size: int = 16,
                       gpu_memory_utilization: float = 0.9, weight_dtype: str = "bf16", kv_dtype: str = "bf16",
                       max_num_batched_tokens: int = 8192, max_num_seqs: int = 256,
                       draft: ModelSpec | None = None, mtp: bool = False, share_of_free: bool = False,
                       activations_outside: bool = False) -> MemoryPlan:
    """`plan_memory` of one GPU of the busiest stage, attention split by the attention TP;
    blocks are one attention rank's (a DP-attention replica has `layout.n_kv_ranks` of them)."""
    if layout.pp == 1 and layout.is_dense_tp_pp:
        return plan_memory(model, hw, layout.tp, block_size, gpu_memory_utilization, weight_dtype, kv_dtype,
                           max_num_batched_tokens, max_num_seqs, draft, mtp=mtp, share_of_free=share_of_free,
                           activations_outside=activations_outside)
    per_group = uniform_dtype(model, weight_dtype) is None  # per-group dtypes (an fp8 checkpoint)
    by_group = _grouped_weight_bytes(model, layout, weight_dtype, mtp) \
        if per_group or model.extra_weight_params else None
    if per_group:
        weight_bytes = sum(by_group.values())
    else:
        weight_bytes = math.ceil(layout_weight_elements_per_gpu(model, layout)
                                 * bytes_per_element(weight_dtype, "--weight-dtype"))
    plan = plan_memory(stage_model(model, layout), hw, layout.attention_tp, block_size, gpu_memory_utilization,
                       weight_dtype, kv_dtype, max_num_batched_tokens, max_num_seqs, draft,
                       mtp=mtp, weight_bytes_override=weight_bytes, share_of_free=share_of_free,
                       activations_outside=activations_outside)
    return replace(plan, weight_bytes_per_gpu_by_group=by_group)  # this layout's groups, not plain TP's


def _grouped_weight_bytes(model: ModelSpec, layout: ReplicaLayout, weight_dtype: str, mtp: bool) -> dict[str, int]:
    """Weight bytes per GPU of the busiest stage per tensor group (+ `extra`: weights outside the
    decoder, in the checkpoint's dtype): every group split by the attention TP, the routed experts
    spread over the MoE layer's GPUs, one vocab table per stage under PP; each group in its dtype."""
    stage = stage_model(model, layout)
    elements = weight_elements_by_group(stage, layout.attention_tp, with_mtp=mtp)
    if layout.pp > 1:
        elements["embedding"] = math.ceil(model.vocab_size * model.hidden_size / layout.attention_tp)
    if model.moe is not None:
        elements["experts"] = weight_elements_by_group(stage, layout.moe_group, with_mtp=mtp)["experts"]
        elements["experts"] += redundant_expert_elements_per_gpu(stage, layout)
    dtypes = group_dtypes(model, weight_dtype) or {}
    out = {g: math.ceil(n * bytes_per_element(dtypes.get(g, weight_dtype), "--weight-dtype"))
           for g, n in elements.items()}
    if model.extra_weight_params:
        out["extra"] = math.ceil(model.extra_weight_params * bytes_per_element(CHECKPOINT_DEFAULT))
    return out
