"""Time decode attention (GQA paged, MLA absorbed) and prefill attention for a run's models.

Decode on CUDA runs the split-KV Triton kernel (`kernels.paged_attention_triton`) with its split
count fixed before timing (reading it from the context lengths would synchronise the host,
which a CUDA-graph capture forbids); on CPU, or without Triton, the torch paged reference.
Prefill runs torch SDPA on the first backend that takes the shape (flash on CUDA where it has
it, math on CPU); the row's `kernel` column names what ran.
"""

from __future__ import annotations

import torch

from calibrate.run_state import RunState
from calibrate.time_gemms import is_large
from kernels import latent_attention as latent
from kernels import paged_attention as paged
from kernels import paged_attention_triton as paged_triton
from kernels import prefill_attention
from kernels.arch_shapes import LatentHeads, decode_heads, prefill_heads
from kernels.shapes import ModelDims, shardable


def _distinct(models: list[ModelDims], run: RunState, heads_of):
    """Distinct (tp, heads) over the models, `heads_of(dims, tp)` per shardable TP size."""
    seen = set()
    for dims in models:
        for tp in run.grid.tps_for(is_large(dims)):
            heads = heads_of(dims, tp) if shardable(dims, tp) else None
            if heads is not None and heads not in seen:
                seen.add(heads)
                yield tp, heads


def _uses_triton(device: str) -> bool:
    return device == "cuda" and paged_triton.triton_available()


def _decode_runner(run: RunState, heads, block_size: int, batch_size: int, context_len: int):
    """(make_inputs, run, kernel class) for one decode configuration."""
    triton = _uses_triton(run.device)
    if isinstance(heads, LatentHeads):
        scale, n_kv_heads, width = heads.qk_head_dim**-0.5, 1, heads.latent_dim

        def make_inputs():
            return latent.random_latent_batch([context_len] * batch_size, block_size, heads.n_heads,
                                              heads.latent_dim, heads.rope_dim, run.dtype, run.device)  # fmt: skip
    else:
        scale, n_kv_heads, width = heads.head_dim**-0.5, heads.n_kv_heads, heads.head_dim

        def make_inputs():
            return paged.random_paged_batch([context_len] * batch_size, block_size, heads.n_heads,
                                            heads.n_kv_heads, heads.head_dim, run.dtype, run.device)  # fmt: skip
    if not triton:
        reference = latent.latent_decode_attention_torch if isinstance(heads, LatentHeads) else \
            paged.paged_decode_attention_torch
        return make_inputs, lambda batch: reference(batch, scale), "torch_paged_reference"
    tile = 64 if width <= 128 else 16
    n_splits = paged_triton.default_n_splits(batch_size, n_kv_heads, context_len, tile, torch.device(run.device))
    kernel = latent.latent_decode_attention_triton if isinstance(heads, LatentHeads) else \
        paged_triton.paged_decode_attention_triton
    return make_inputs, lambda batch: kernel(batch, scale, n_splits=n_splits), paged_triton.KERNEL_CLASS


def _head_fields(heads) -> tuple[str, dict]:
    if isinstance(heads, LatentHeads):
        return "mla_decode_attention", {"n_heads": heads.n_heads, "n_kv_heads": 1,
                                        "head_dim": heads.latent_dim + heads.rope_dim, "v_head_dim": heads.latent_dim}
    return "decode_attention", {"n_heads": heads.n_heads, "n_kv_heads": heads.n_kv_heads, "head_dim": heads.head_dim}


def time_decode(run: RunState, models: list[ModelDims]) -> None:
    """One row per (TP heads, block size, batch, context) within the grid's KV-token cap."""
    for tp, heads in _distinct(models, run, decode_heads):
        op, fields = _head_fields(heads)
        for block_size, batch_size, context_len in run.grid.decode_points():
            if run.out_of_time():
                continue
            make_inputs, decode, kernel = _decode_runner(run, heads, block_size, batch_size, context_len)
            probe = make_inputs()
            what = f"{op} tp={tp} block={block_size} batch={batch_size} context={context_len}"
            timing = run.measure(make_inputs, probe.n_bytes, decode, what)
            run.add(op, timing, tp, m_tokens=batch_size, batch_size=batch_size, context_tokens=float(context_len),
                    block_size=block_size, kernel=kernel, **fields)  # fmt: skip


def time_prefill(run: RunState, models: list[ModelDims]) -> None:
    """One row per (TP heads, batch, prompt length); MLA prefill as MHA at the qk head dim."""
    for tp, heads in _distinct(models, run, prefill_heads):
        for batch_size, seq_len in run.grid.prefill_points():
            if run.out_of_time():
                continue

            def make_inputs(b=batch_size, s=seq_len, h=heads):
                return prefill_attention.make_prefill_inputs(
                    b, s, h.n_heads, h.n_kv_heads, h.head_dim, run.dtype, run.device
                )

            probe = make_inputs()
            kernel = prefill_attention.pick_backend(probe)
            what = f"prefill_attention tp={tp} batch={batch_size} seq={seq_len}"
            timing = run.measure(make_inputs, probe.n_bytes, prefill_attention.prefill_with_backend(kernel), what)
            run.add(
                "prefill_attention", timing, tp,
                m_tokens=batch_size * seq_len, batch_size=batch_size,
                context_tokens=float(seq_len), n_heads=heads.n_heads,
                n_kv_heads=heads.n_kv_heads, head_dim=heads.head_dim, kernel=kernel,
            )  # fmt: skip
