"""Memory planner: what one GPU of a replica holds, and how many KV blocks fit beside it."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from sim.errors import InputError
from sim.inputs.dtypes import kv_bytes_per_element
from sim.inputs.hardware import GIB, HardwareProfile
from sim.inputs.model import ModelSpec
from sim.inputs.model.kv import (
    kv_elements_per_token,
    kv_elements_per_token_layer,
    pooled_layers,
    window_blocks_per_seq,
    window_layers,
)
from sim.inputs.model.params import weight_elements_by_group
from sim.inputs.model.weights import uniform_dtype, weight_bytes_by_group, weight_bytes_per_gpu

RAISE_TP_HINT = " (raise --tp or --gpu-memory-utilization, or use a smaller dtype)"  # plan rewrites it at a node's GPUs


@dataclass(frozen=True)
class MemoryPlan:
    weight_bytes_per_gpu: int
    activation_reserve_bytes_per_gpu: int
    runtime_reserve_bytes_per_gpu: int
    usable_bytes_per_gpu: int
    kv_cache_bytes_per_gpu: int
    kv_bytes_per_token: int  # whole replica (all GPUs together)
    kv_bytes_per_token_per_gpu: int
    block_size: int
    num_gpu_blocks: int
    max_cached_tokens: int
    # hybrid attention: the windowed layers' blocks of max_num_seqs running sequences (sim/inputs/model/kv.py)
    kv_window_reserve_bytes_per_gpu: int = 0
    weight_bytes_per_gpu_by_group: dict | None = None  # per tensor group, for models with per-group dtypes

    def to_dict(self) -> dict:
        return asdict(self)


def weight_elements_per_gpu(model: ModelSpec, tp: int) -> int:
    """Weight elements one GPU holds: everything sharded by tp, except KV projections replicate
    once tp exceeds the KV heads."""
    return sum(weight_elements_by_group(model, tp).values())


def kv_bytes_per_token_gpu(model: ModelSpec, tp: int, kv_el: float) -> int:
    """KV bytes one GPU adds to the block pool per token: the pooled (full-attention) layers."""
    return math.ceil(pooled_layers(model) * kv_elements_per_token_layer(model, "full", tp) * kv_el)


def kv_window_bytes_per_token(model: ModelSpec, tp: int, kv_el: float) -> float:
    """KV bytes one GPU caches per token in the windowed layers (0 without)."""
    return window_layers(model) * kv_elements_per_token_layer(model, "full", tp) * kv_el


def kv_window_reserve_bytes(model: ModelSpec, tp: int, kv_el: float, block_size: int, max_num_seqs: int,
                            budget_bytes: float, pool_bytes_per_token: float) -> int:
    """Bytes one GPU keeps for the windowed layers. A sequence holds min(its tokens, its window
    blocks) there, so they never need more than min(T, S) tokens' worth, T the tokens the pool
    holds and S = max_num_seqs x window tokens: with w, f the windowed and pooled bytes per token
    and P the budget, T = P / (f + w) when that is at most S, else the reserve is w x S."""
    w = kv_window_bytes_per_token(model, tp, kv_el)
    if not w or budget_bytes <= 0:
        return 0
    cap_tokens = max_num_seqs * window_blocks_per_seq(model, block_size) * block_size
    tokens_if_shared = budget_bytes / (pool_bytes_per_token + w)
    return math.ceil(w * min(tokens_if_shared, cap_tokens))


def _by_group(model: ModelSpec, tp: int, weight_dtype: str, mtp: bool) -> dict | None:
    """Weight bytes per tensor group, for models whose groups differ (None otherwise)."""
    if uniform_dtype(model, weight_dtype) is None or model.extra_weight_params:
        return weight_bytes_by_group(model, tp, weight_dtype, with_mtp=mtp)
    return None


def activation_reserve_bytes(model: ModelSpec, tp: int, max_num_batched_tokens: int, max_num_seqs: int,
                             act_bytes: int) -> int:
    """Peak transient activations of the largest forward pass, per GPU: the widest intermediate
    tensors of one layer for max_num_batched_tokens tokens, plus fp32 logits of max_num_seqs rows."""
    mlp_width = model.intermediate_size * model.n_active_experts if model.moe is None or \
        model.moe.expert_intermediate_size is None else max(
            model.intermediate_size, model.expert_intermediate_size * model.n_active_experts
            + model.shared_intermediate_size)
    width = (
        (model.n_heads // tp + 2 * model.kv_heads_per_gpu(tp)) * model.head_dim
        + 3 * mlp_width // tp
        + 4 * model.hidden_size
    )
    logits = max_num_seqs * (model.vocab_size // tp) * 4
    return max_num_batched_tokens * width * act_bytes + logits


def plan_memory(
    model: ModelSpec,
    hw: HardwareProfile,
    tp: int = 1,
    block_size: int = 16,
    gpu_memory_utilization: float = 0.9,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    max_num_batched_tokens: int = 8192,
    max_num_seqs: int = 256,
    draft: ModelSpec | None = None,
    mtp: bool = False,
    weight_bytes_override: int | None = None,
    share_of_free: bool = False,
    activations_outside: bool = False,
) -> MemoryPlan:
    """Blocks per replica = floor((HBM * util - runtime reserve - weights/GPU - activations) /
    (block_size * KV bytes per token per GPU)). Refuses a config whose weights do not fit.
    A speculative-decoding `draft` model (same TP and dtypes) adds its weights to the weights and
    its KV per token to every block (its cache follows the target's block tables). `mtp`: the
    model's MTP layers are loaded (speculative decoding with them): their weights, and their KV
    per token, join the plan.
    `weight_bytes_override` replaces the weights of plain TP (a layout's own, sim/inputs/layout/layout_memory.py).
    `share_of_free` (TensorRT-LLM's kv_cache_free_gpu_mem_fraction): the KV budget is
    gpu_memory_utilization x (HBM - runtime - weights - activations), the share of what the model
    leaves, as its KvCacheCreator sizes the pool after a profiling forward pass.
    `activations_outside` (SGLang's mem_fraction_static): weights + KV pool = HBM x util, the activations
    and CUDA graphs live in the rest, so they are not taken from the KV budget again."""
    if not 0 < gpu_memory_utilization <= 1:
        raise InputError("--gpu-memory-utilization", None, "must be in (0, 1]")
    if block_size < 1:
        raise InputError("--block-size", None, "must be a positive integer")
    model.check_tp(tp)
    weight_bytes = (weight_bytes_per_gpu(model, tp, weight_dtype, with_mtp=mtp) if weight_bytes_override is None
                    else weight_bytes_override)
    kv_el = kv_bytes_per_element(kv_dtype, "--kv-dtype")
    activations = activation_reserve_bytes(model, tp, max_num_batched_tokens, max_num_seqs, 2)
    runtime = int(hw.memory.runtime_reserve_gib * GIB)
    usable = int(hw.hbm_bytes * (1.0 if share_of_free else gpu_memory_utilization))
    kv_token_gpu = kv_bytes_per_token_gpu(model, tp, kv_el)
    if mtp:
        kv_token_gpu += math.ceil(model.mtp_layers * kv_elements_per_token_layer(model, "full", tp) * kv_el)
    if draft is not None:
        weight_bytes += weight_bytes_per_gpu(draft, tp, weight_dtype)
        kv_token_gpu += kv_bytes_per_token_gpu(draft, tp, kv_el)
    kv_budget = usable - runtime - weight_bytes - (0 if activations_outside else activations)
    if share_of_free and kv_budget > 0:
        kv_budget = int(kv_budget * gpu_memory_utilization)
    window_reserve = kv_window_reserve_bytes(model, tp, kv_el, block_size, max_num_seqs, kv_budget, kv_token_gpu)
    if window_reserve:
        kv_budget -= window_reserve
    if kv_budget < block_size * kv_token_gpu:
        need_gib = (weight_bytes + activations + runtime) / GIB
        raise InputError(
            f"--model {model.name}{'' if draft is None else f' (+ draft {draft.name})'} on --hardware {hw.name} "
            f"--tp {tp}", None,
            f"does not fit: weights+activations+runtime need {need_gib:.1f} GiB per GPU of "
            f"{usable / GIB:.1f} GiB usable{RAISE_TP_HINT}",
        )
    blocks = kv_budget // (block_size * kv_token_gpu)
    return MemoryPlan(
        weight_bytes_per_gpu=weight_bytes,
        activation_reserve_bytes_per_gpu=activations,
        runtime_reserve_bytes_per_gpu=runtime,
        usable_bytes_per_gpu=usable,
        kv_cache_bytes_per_gpu=blocks * block_size * kv_token_gpu,
        kv_bytes_per_token=math.ceil(kv_elements_per_token(model) * kv_el),
        kv_bytes_per_token_per_gpu=kv_token_gpu,
        block_size=block_size,
        num_gpu_blocks=int(blocks),
        max_cached_tokens=int(blocks * block_size),
        kv_window_reserve_bytes_per_gpu=window_reserve,
        weight_bytes_per_gpu_by_group=_by_group(model, tp, weight_dtype, mtp),
    )


def blocks_beside_adapters(cfg, model, memory: MemoryPlan) -> int:
    """KV blocks per GPU once LoRA adapter slots are allocated (sim.inputs.lora; all blocks without LoRA)."""
    from sim.inputs.lora import blocks_beside_adapters as beside

    return beside(cfg, model, memory)
