"""KV cache per token of a `ModelSpec`, per layer and per GPU, and what a sequence keeps.

Per layer and token: full and sliding / chunked layers cache K and V, 2 * n_kv_heads * head_dim
elements (split across TP by heads, replicated beyond them); MLA caches the latent and the
shared RoPE key, kv_lora_rank + qk_rope_head_dim elements, whole on every TP rank (vLLM's MLA
backends keep one latent "head").

Windowed layers keep only their window, the way vLLM's hybrid KV cache manager allocates them
(v1/core/single_type_kv_cache_manager.py): a sliding layer needs the blocks of the last W - 1
tokens plus the one being written, ceil((W - 1) / B) + 1 blocks; a chunked-local layer (Llama-4)
the current chunk's ceil(W / B) blocks. The simulator's block pool tracks the full-attention
layers (a sequence's blocks grow with its tokens); the windowed layers' blocks are a bounded
reserve per running sequence (`sim/inputs/layout/memory.py`). A model whose layers are all windowed keeps them
in the pool as if full (an upper bound on what it holds).
"""

from __future__ import annotations

import math

from sim.inputs.model.spec import AttentionKind, ModelSpec


def kv_elements_per_token_layer(m: ModelSpec, kind: AttentionKind = "full", tp: int = 1) -> int:
    """Elements one GPU caches per token in one layer of attention `kind` (tp=1: the whole layer)."""
    if m.mla is not None:
        return m.mla.kv_lora_rank + m.mla.qk_rope_head_dim
    kv_heads = m.n_kv_heads if tp == 1 else m.kv_heads_per_gpu(tp)
    return 2 * kv_heads * m.head_dim


def kv_elements_per_token(m: ModelSpec) -> int:
    """KV elements cached per token, whole model (all layers; MLA: the latent and RoPE key).
    Sliding / chunked layers count too: `window_blocks_per_seq` says how many tokens they keep."""
    return sum(kv_elements_per_token_layer(m, m.attention_kind(i)) for i in range(m.n_layers))


def pooled_layers(m: ModelSpec) -> int:
    """Layers whose KV grows with the sequence and lives in the block pool."""
    full = m.n_layers_of("full")
    return full if full else m.n_layers


def window_layers(m: ModelSpec) -> int:
    """Layers whose KV is a bounded per-sequence reserve (0 when every layer is windowed: see above)."""
    return m.n_layers - pooled_layers(m)


def window_kept_blocks(m: ModelSpec, block_size: int) -> int:
    """Blocks a sequence needs in one windowed layer (0 without windowed layers)."""
    if not m.is_hybrid_attention:
        return 0
    w = m.window_tokens
    if m.n_layers_of("chunked"):
        return math.ceil(w / block_size)
    return math.ceil((w - 1) / block_size) + 1


def window_blocks_per_seq(m: ModelSpec, block_size: int) -> int:
    """Blocks one running sequence holds in each windowed layer outside the pool (0 when the
    windowed layers are pooled, i.e. every layer is windowed)."""
    return window_kept_blocks(m, block_size) if window_layers(m) else 0


def kv_bytes_per_sequence(m: ModelSpec, context_tokens: int, kv_bytes_el: float, block_size: int = 16,
                          tp: int = 1) -> int:
    """KV bytes one GPU holds for one sequence of `context_tokens` (whole blocks per layer)."""
    per_layer_token = kv_elements_per_token_layer(m, "full", tp) * kv_bytes_el
    blocks = math.ceil(context_tokens / block_size)
    window = min(blocks, window_blocks_per_seq(m, block_size))
    return math.ceil(block_size * per_layer_token * (pooled_layers(m) * blocks + window_layers(m) * window))
