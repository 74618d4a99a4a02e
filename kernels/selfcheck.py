"""Check every paged-decode implementation against dense attention; print JSON.

`python -m kernels.selfcheck [--device cpu|cuda] [--dtype fp32]` compares the torch
reference and (when Triton imports) the split-KV Triton kernel (its own split count, and 3
splits: `triton_3_splits`) with `dense_decode_attention` for each block size, on ragged
contexts whose last block is partial, with GQA; and the MLA absorbed form (`mla_torch`,
`mla_triton`: one latent KV row of latent + rope dims, 8 query heads over it) with
`dense_latent_attention`. Outputs are
poisoned with NaN first, so an unwritten element fails. On CPU the Triton kernel needs
TRITON_INTERPRET=1 in the environment; without it that entry reports why it was skipped.
Exit status 1 if any relative error (‖out − dense‖ / ‖dense‖) exceeds the tolerance.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

import torch

from kernels import latent_attention as la
from kernels import paged_attention as pa
from kernels import paged_attention_triton as pat

BLOCK_SIZES = (8, 16, 32, 64, 128)
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
TOLERANCE = {"fp32": 1e-5, "fp16": 5e-3, "bf16": 1e-2}  # METHOD.md bands


def relative_error(out: torch.Tensor, dense: torch.Tensor) -> float:
    """‖out − dense‖ / ‖dense‖ in float64; NaN anywhere gives inf."""
    diff = (out.double() - dense.double()).norm()
    error = float(diff / dense.double().norm())
    return math.inf if math.isnan(error) else error


def _dense_case(context_lens, n_heads, n_kv_heads, head_dim, dtype, generator):
    def rand(*shape):
        return torch.randn(*shape, generator=generator).to(dtype)

    q = rand(len(context_lens), n_heads, head_dim)
    k_seqs = [rand(n, n_kv_heads, head_dim) for n in context_lens]
    v_seqs = [rand(n, n_kv_heads, head_dim) for n in context_lens]
    return q, k_seqs, v_seqs


MLA_CASE = {"latent_dim": 64, "rope_dim": 16, "n_heads": 8}  # DeepSeek's 512 + 64 scaled down


def _run(name: str, batch, scale: float) -> torch.Tensor:
    if name == "torch":
        return pa.paged_decode_attention_torch(batch, scale)
    if name == "mla_torch":
        return la.latent_decode_attention_torch(batch, scale)
    poisoned = torch.full_like(batch.q[..., : batch.q.shape[2] - getattr(batch, "rope_dim", 0)], float("nan"))
    n_splits = 3 if name == "triton_3_splits" else None
    if name == "mla_triton":
        return la.latent_decode_attention_triton(batch, scale, out=poisoned)
    return pat.paged_decode_attention_triton(batch, scale, out=poisoned, n_splits=n_splits)


def _mla_case(context_lens, block_size, dtype, generator, device):
    latent, rope, n_heads = MLA_CASE["latent_dim"], MLA_CASE["rope_dim"], MLA_CASE["n_heads"]
    q = torch.randn(len(context_lens), n_heads, latent + rope, generator=generator).to(dtype)
    rows = [torch.randn(n, latent + rope, generator=generator).to(dtype) for n in context_lens]
    scale = 48**-0.5  # as DeepSeek: 1/sqrt(nope + rope), not the latent width
    dense = la.dense_latent_attention(q, rows, latent, scale)
    batch = la.latent_batch_from_dense(q, rows, latent, block_size, generator)
    tensors = (batch.q, batch.kv_cache, batch.block_table, batch.context_lens)
    return la.LatentPagedBatch(*(t.to(device) for t in tensors), latent), dense, scale


def _to(batch: pa.PagedBatch, device: str) -> pa.PagedBatch:
    tensors = (batch.q, batch.k_cache, batch.v_cache, batch.block_table, batch.context_lens)
    return pa.PagedBatch(*(t.to(device) for t in tensors))


def check(
    device: str = "cpu",
    dtype_name: str = "fp32",
    context_lens: tuple[int, ...] = (1, 37, 130, 64),
    n_heads: int = 8,
    n_kv_heads: int = 2,
    head_dim: int = 32,
    seed: int = 0,
) -> dict:
    """Relative error of each implementation per block size: {impl: {block_size: err}},
    plus `skipped: {impl: reason}`."""
    generator = torch.Generator().manual_seed(seed)
    dtype = DTYPES[dtype_name]
    impls, skipped = ["torch"], {}
    if not pat.triton_available():
        skipped["triton"] = "Triton is not installed"
    elif device == "cpu" and not pat.triton.knobs.runtime.interpret:
        skipped["triton"] = "TRITON_INTERPRET=1 not set"
    else:
        impls += ["triton", "triton_3_splits"]
    mla_impls = ["mla_torch"] + (["mla_triton"] if "triton" in impls else [])
    errors: dict = {name: {} for name in impls + mla_impls}
    scale = head_dim**-0.5
    for block_size in BLOCK_SIZES:
        q, k_seqs, v_seqs = _dense_case(
            context_lens, n_heads, n_kv_heads, head_dim, dtype, generator
        )
        dense = pa.dense_decode_attention(q, k_seqs, v_seqs, scale)
        batch = _to(pa.paged_batch_from_dense(q, k_seqs, v_seqs, block_size, generator), device)
        for name in impls:
            errors[name][block_size] = relative_error(_run(name, batch, scale).cpu(), dense)
        mla_batch, mla_dense, mla_scale = _mla_case(context_lens, block_size, dtype, generator, device)
        for name in mla_impls:
            errors[name][block_size] = relative_error(_run(name, mla_batch, mla_scale).cpu(), mla_dense)
    return {"errors": errors, "skipped": skipped, "tolerance": TOLERANCE[dtype_name]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="fp32", choices=sorted(DTYPES))
    args = parser.parse_args(argv)
    result = check(args.device, args.dtype)
    print(json.dumps(result))
    worst = max(e for per_block in result["errors"].values() for e in per_block.values())
    return 0 if worst <= result["tolerance"] else 1


if __name__ == "__main__":
    sys.exit(main())
