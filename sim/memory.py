"""Memory planner: what one GPU of a replica holds, and how many KV blocks fit beside it."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from sim.dtypes import bytes_per_element, kv_bytes_per_element
from sim.errors import InputError
from sim.hardware import GIB, HardwareProfile
from sim.model import ModelSpec


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

    def to_dict(self) -> dict:
        return asdict(self)


def weight_elements_per_gpu(model: ModelSpec, tp: int) -> int:
    """Weight elements one GPU holds: everything sharded by tp, except KV projections replicate
    once tp exceeds the KV heads."""
    kv_heads = model.kv_heads_per_gpu(tp)
    d, h = model.head_dim, model.hidden_size
    attn = h * (model.n_heads // tp + 2 * kv_heads) * d + (model.n_heads // tp) * d * h
    router = h * model.n_experts if model.moe else 0
    mlp = model.n_experts * model.expert_params // tp + router
    return model.n_layers * (attn + mlp) + math.ceil(model.embedding_params / tp)


def activation_reserve_bytes(model: ModelSpec, tp: int, max_num_batched_tokens: int, max_num_seqs: int,
                             act_bytes: int) -> int:
    """Peak transient activations of the largest forward pass, per GPU: the widest intermediate
    tensors of one layer for max_num_batched_tokens tokens, plus fp32 logits of max_num_seqs rows."""
    width = (
        (model.n_heads // tp + 2 * model.kv_heads_per_gpu(tp)) * model.head_dim
        + 3 * model.intermediate_size * model.n_active_experts // tp
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
    weight_bytes_per_gpu: int | None = None,
) -> MemoryPlan:
    """Blocks per replica = floor((HBM * util - runtime reserve - weights/GPU - activations) /
    (block_size * KV bytes per token per GPU)). Refuses a config whose weights do not fit.
    A speculative-decoding `draft` model (same TP and dtypes) adds its weights to the weights and
    its KV per token to every block (its cache follows the target's block tables).
    `weight_bytes_per_gpu` replaces the weights of plain TP (a layout's own, sim/layout_memory.py)."""
    if not 0 < gpu_memory_utilization <= 1:
        raise InputError("--gpu-memory-utilization", None, "must be in (0, 1]")
    if block_size < 1:
        raise InputError("--block-size", None, "must be a positive integer")
    model.check_tp(tp)
    weight_bytes = math.ceil(weight_elements_per_gpu(model, tp) * bytes_per_element(weight_dtype, "--weight-dtype"))
    weight_bytes = weight_bytes if weight_bytes_per_gpu is None else weight_bytes_per_gpu
    kv_el = kv_bytes_per_element(kv_dtype, "--kv-dtype")
    activations = activation_reserve_bytes(model, tp, max_num_batched_tokens, max_num_seqs, 2)
    runtime = int(hw.memory.runtime_reserve_gib * GIB)
    usable = int(hw.hbm_bytes * gpu_memory_utilization)
    kv_budget = usable - runtime - weight_bytes - activations
    kv_token_gpu = math.ceil(2 * model.n_layers * model.kv_heads_per_gpu(tp) * model.head_dim * kv_el)
    if draft is not None:
        draft_el = bytes_per_element(weight_dtype, "--weight-dtype")
        weight_bytes += math.ceil(weight_elements_per_gpu(draft, tp) * draft_el)
        kv_token_gpu += math.ceil(2 * draft.n_layers * draft.kv_heads_per_gpu(tp) * draft.head_dim * kv_el)
        kv_budget = usable - runtime - weight_bytes - activations
    if kv_budget < block_size * kv_token_gpu:
        need_gib = (weight_bytes + activations + runtime) / GIB
        raise InputError(
            f"--model {model.name}{'' if draft is None else f' (+ draft {draft.name})'} on --hardware {hw.name} "
            f"--tp {tp}", None,
            f"does not fit: weights+activations+runtime need {need_gib:.1f} GiB per GPU of "
            f"{usable / GIB:.1f} GiB usable (raise --tp or --gpu-memory-utilization, or use a smaller dtype)",
        )
    blocks = kv_budget // (block_size * kv_token_gpu)
    return MemoryPlan(
        weight_bytes_per_gpu=weight_bytes,
        activation_reserve_bytes_per_gpu=activations,
        runtime_reserve_bytes_per_gpu=runtime,
        usable_bytes_per_gpu=usable,
        kv_cache_bytes_per_gpu=blocks * block_size * kv_token_gpu,
        kv_bytes_per_token=math.ceil(model.kv_elements_per_token() * kv_el),
        kv_bytes_per_token_per_gpu=kv_token_gpu,
        block_size=block_size,
        num_gpu_blocks=int(blocks),
        max_cached_tokens=int(blocks * block_size),
    )
