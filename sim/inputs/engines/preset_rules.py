"""Engine-preset rules that depend on the run (SGLang 0.5's defaults by GPU memory, its mem_fraction_static
formula) and TensorRT-LLM's attention-DP balancing knobs (sim/engine/adp_balance.py): sim/inputs/engines/preset.py
holds them in an EnginePreset."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from sim.schema import MAX_TOKENS, Plausible, StrictModel

CaptureSize = Annotated[int, Field(ge=1, le=MAX_TOKENS)]


class GpuMemoryTier(StrictModel):
    """Defaults the engine picks by the GPU's memory (SGLang 0.5 `_handle_gpu_memory_settings`): the
    first tier whose `below_gib` exceeds the GPU's memory (None: any size) gives the prompt chunk and the
    largest CUDA-graph batch (`cuda_graph_max_bs_tp4` from tensor parallel 4 up, where it differs)."""

    below_gib: Plausible("hbm_gib") | None = None
    chunk_size: Plausible("batch_tokens", int)
    cuda_graph_max_bs: CaptureSize
    cuda_graph_max_bs_tp4: CaptureSize | None = None

    def graph_max_bs(self, tp: int) -> int:
        return self.cuda_graph_max_bs_tp4 if tp >= 4 and self.cuda_graph_max_bs_tp4 else self.cuda_graph_max_bs


class AttentionDpBalance(StrictModel):
    """TensorRT-LLM's `attention_dp_config` (llm_args.py AttentionDpConfig): with `enable_balance`, a
    context request waits up to `timeout_iters` / `batching_wait_iters` iterations until every attention-DP
    rank has one (sim/engine/adp_balance.py models it on the lockstep attention-DP path)."""

    enable_balance: bool = False
    timeout_iters: int = Field(50, ge=0)
    batching_wait_iters: int = Field(10, ge=0)


class MemFractionRule(StrictModel):
    """SGLang 0.5's mem_fraction_static when the user gives none (server_args.py _handle_gpu_memory_settings):
    (GPU MiB - reserved) / GPU MiB rounded to 3 places, reserved = max(chunk, min_chunk_tokens) x
    chunk_mib_per_token + graph_bs x graph_mib_per_bs + tp x pp x parallel_mib_per_gpu (+ graph_bs x dp x
    dp_attention_mib_per_bs_rank under DP attention, + graph_bs x dp x dp_attention_large_mib_per_bs_rank above
    dp_attention_large_bs), at least min_reserve_mib on GPUs above min_reserve_above_gib, then + speculative_mib
    (EAGLE / MTP) or draft_model_mib (a draft model). The chunk is the one before the DP-attention division
    (the engine reserves first)."""

    chunk_mib_per_token: float = Field(ge=0)
    min_chunk_tokens: int = Field(ge=0)
    graph_mib_per_bs: float = Field(ge=0)
    parallel_mib_per_gpu: float = Field(ge=0)
    dp_attention_mib_per_bs_rank: float = Field(ge=0)
    dp_attention_large_bs: int = Field(ge=0)
    dp_attention_large_mib_per_bs_rank: float = Field(ge=0)
    speculative_mib: float = Field(ge=0)  # EAGLE heads / MTP draft and their graphs
    draft_model_mib: float = Field(ge=0)  # a separate draft model (SGLang STANDALONE)
    min_reserve_mib: float = Field(ge=0)
    min_reserve_above_gib: float = Field(ge=0)

    def fraction(self, hbm_gib: float, chunk: int, graph_bs: int, tp: int, pp: int, dp_attention_ranks: int,
                 speculative: str | None) -> float:
        gpu_mib = hbm_gib * 1024
        reserved = max(chunk, self.min_chunk_tokens) * self.chunk_mib_per_token + graph_bs * self.graph_mib_per_bs
        reserved += tp * pp * self.parallel_mib_per_gpu
        if dp_attention_ranks > 1:
            reserved += graph_bs * dp_attention_ranks * self.dp_attention_mib_per_bs_rank
            if graph_bs > self.dp_attention_large_bs:
                reserved += graph_bs * dp_attention_ranks * self.dp_attention_large_mib_per_bs_rank
        if hbm_gib > self.min_reserve_above_gib:
            reserved = max(reserved, self.min_reserve_mib)
        if speculative is not None:  # sim's spec_method: heads / mtp (EAGLE in SGLang) or draft (STANDALONE)
            reserved += self.draft_model_mib if speculative == "draft" else self.speculative_mib
        return round((gpu_mib - reserved) / gpu_mib, 3)


def gpu_memory_tier(tiers: list[GpuMemoryTier] | None, hbm_gib: float) -> GpuMemoryTier | None:
    """The tier a GPU of `hbm_gib` falls in (None without tiers)."""
    for tier in tiers or []:
        if tier.below_gib is None or hbm_gib < tier.below_gib:
            return tier
    return None
