"""Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2) as the attention terms see it.

KV per token and layer: the kv_lora_rank latent plus the shared qk_rope_head_dim RoPE key, whole on
every TP rank (one latent "head"; vLLM's MLA backends replicate it).

Decode, with absorbed weights (FlashMLA; DeepSeek-V2 paper, arXiv:2405.04434 sec. 2.1.3): every
query head scores the latent directly (W_UK folded into the query) and sums latents (W_UV folded
into the output), so per query-key pair and head: 2 (kv_lora + rope) FLOPs for the score and
2 kv_lora for the value sum, over KV read once for all heads: few bytes per FLOP, the reason MLA
decode reaches the compute roof sooner than GQA (FlashMLA reports up to 3000 GB/s memory-bound
and 580 TFLOPS compute-bound on H800, README of deepseek-ai/FlashMLA).

Prefill, without absorption (vLLM's MLA prefill, FlashAttention over up-projected K/V): per pair
and head 2 (qk_nope + qk_rope) for the score and 2 v_head_dim for the value. The up-projection of
the new tokens' latents is the kv_b GEMM (sim/cost/arch.py). A prefill over cached context (a
prefix-cache hit, or the later chunks of a chunked prefill) also up-projects the CACHED latents:
vLLM's MLA prefill (vllm-project/vllm vllm/v1/attention/backends/mla/common.py at commit
37fa5c0940ef, "Chunked Prefill": cache_k_nope_chunk = cache_kv_c_chunk @ W_UK, cache_v_chunk =
cache_kv_c_chunk @ W_UV, every step, for the whole context of every prefill sequence) runs kv_b
over them: one more GEMM of (sum of the prefill sequences' cached tokens) x kv_lora_rank ->
heads x (qk_nope + v) per GPU (`mla_context_shape`; `CostModel.mla_context_op`). Decode steps
(one new token) attend over the latent with absorbed weights and re-expand nothing. Its output
is counted as written (GEMM activation bytes); the attention's read of the expanded K/V is not
added (prefill attention is compute-bound). Attention takes the profile's attention efficiencies
(`attention_compute`, `paged_attention_memory`), the GEMM the `kv_b_proj` GEMM terms.
"""

from __future__ import annotations

from sim.inputs.model.kv import kv_elements_per_token_layer
from sim.inputs.model.spec import ModelSpec


def mla_kv_elements_per_token(model: ModelSpec) -> int:
    return kv_elements_per_token_layer(model, "full")


def mla_pair_flops(model: ModelSpec, q_heads_gpu: int) -> dict[str, float]:
    """FLOPs per causal query-key pair on one GPU, per attention op."""
    a = model.mla
    decode = 2.0 * (a.kv_lora_rank + a.qk_rope_head_dim) + 2.0 * a.kv_lora_rank
    prefill = 2.0 * (a.qk_nope_head_dim + a.qk_rope_head_dim) + 2.0 * a.v_head_dim
    return {"prefill_attention": prefill * q_heads_gpu, "decode_attention": decode * q_heads_gpu}


def mla_context_shape(model: ModelSpec, q_heads_gpu: int) -> tuple[int, int]:
    """(N, K) per GPU of the kv_b up-projection of cached latents (heads x (nope + v), kv_lora)."""
    a = model.mla
    return q_heads_gpu * (a.qk_nope_head_dim + a.v_head_dim), a.kv_lora_rank
