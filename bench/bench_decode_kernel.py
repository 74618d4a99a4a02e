"""KV-read bandwidth of the split-KV Triton paged decode kernel: batch x context -> TB/s.

For a GPU session (issue 39 item 2's target: >= 3 TB/s of KV reads at batch >= 32 and context
>= 2k on an H200, about 60 % of its 4.8 TB/s). Two head layouts: Llama-3-8B on one GPU (GQA,
32 query heads over 8 KV heads of 128) and DeepSeek-R1 on a TP 8 shard (MLA absorbed: 16 query
heads over one latent row of 512 + 64). Each point is checked against the torch paged
reference first (relative error, bf16 band 1e-2), then timed as calibration times it: eager
calls and CUDA-graph replays (`calibrate.timing`), over rotated input copies past the L2.
TB/s = KV bytes the step must read (each context token's K and V, or latent row, once) / the
graph time. Prints one table; `--json FILE` also writes every number.

    python bench/bench_decode_kernel.py [--block-size 16] [--json out.json]

Without a CUDA GPU it says so in one line and exits 0 (nothing to measure).
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from calibrate import grid as grids
from calibrate.run_state import RunState
from kernels import latent_attention as latent
from kernels import paged_attention as paged
from kernels import paged_attention_triton as pat
from kernels.selfcheck import relative_error

BATCHES = (1, 8, 32, 64, 128, 256)
CONTEXTS = (512, 2048, 4096, 8192, 16384)
MAX_KV_TOKENS = 1024 * 1024
LAYOUTS = {  # name: (n_heads, n_kv_heads, head_dim, latent rope dim or None)
    "llama-3-8b tp1 (GQA 32/8 x 128)": (32, 8, 128, None),
    "deepseek-r1 tp8 (MLA 16 x 512+64)": (16, 1, 512, 64),
}
MLA_QK_HEAD_DIM = 128 + 64  # DeepSeek's nope + rope: its softmax scale is 1 / sqrt(192)
PROVENANCE = {"device": "cuda", "source": "bench", "torch_version": torch.__version__, "date": "bench"}


def point(run: RunState, layout, batch: int, context: int, block_size: int) -> dict:
    """Check one configuration against the torch reference, time it, return its numbers."""
    n_heads, n_kv, head_dim, rope = layout
    lens, dtype, device = [context] * batch, run.dtype, run.device
    if rope is None:
        def make():
            return paged.random_paged_batch(lens, block_size, n_heads, n_kv, head_dim, dtype, device)
        scale, kernel, reference = head_dim**-0.5, pat.paged_decode_attention_triton, paged.paged_decode_attention_torch
    else:
        def make():
            return latent.random_latent_batch(lens, block_size, n_heads, head_dim, rope, dtype, device)
        scale = MLA_QK_HEAD_DIM**-0.5
        kernel, reference = latent.latent_decode_attention_triton, latent.latent_decode_attention_torch
    tile = 64 if head_dim <= 128 else 16
    n_splits = pat.default_n_splits(batch, n_kv, context, tile, torch.device(device))
    probe = make()
    error = relative_error(kernel(probe, scale, n_splits=n_splits).float(), reference(probe, scale).double())
    timing = run.measure(make, probe.n_bytes, lambda b: kernel(b, scale, n_splits=n_splits), "bench")
    kv_bytes = probe.kv_bytes_read()
    return {"batch": batch, "context": context, "n_splits": n_splits, "rel_error": error, "kv_bytes": kv_bytes,
            "time_graph_s": timing.get("time_graph_s"), "time_eager_s": timing["time_eager_s"],
            "tb_s": kv_bytes / timing["time_s"] / 1e12, "timing_mode": timing["timing_mode"]}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available() or not pat.triton_available():
        print("bench_decode_kernel: needs a CUDA GPU and Triton; nothing measured")
        return 0
    run = RunState("cuda", "bf16", grids.quick_grid(), None, PROVENANCE)
    from calibrate.timing import cache_flusher

    run.flush = cache_flusher("cuda")
    results = {}
    with torch.inference_mode():
        for name, layout in LAYOUTS.items():
            results[name] = [point(run, layout, b, c, args.block_size) for b in BATCHES for c in CONTEXTS
                             if b * c <= MAX_KV_TOKENS]  # fmt: skip
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=1)
    print(f"{torch.cuda.get_device_name()}, block size {args.block_size}, bf16; TB/s of KV reads (graph replay)")
    for name, points in results.items():
        print(f"\n{name}\n{'batch':>6} {'context':>8} {'splits':>6} {'KV MiB':>8} {'graph us':>9} {'eager us':>9}"
              f" {'TB/s':>6} {'rel err':>8}")
        for p in points:
            graph_us = f"{p['time_graph_s'] * 1e6:9.1f}" if p["time_graph_s"] else f"{'-':>9}"
            print(f"{p['batch']:>6} {p['context']:>8} {p['n_splits']:>6} {p['kv_bytes'] / 2**20:>8.1f} {graph_us}"
                  f" {p['time_eager_s'] * 1e6:9.1f} {p['tb_s']:6.2f} {p['rel_error']:8.1e}")
    worst = max(p["rel_error"] for points in results.values() for p in points)
    return 0 if worst <= 1e-2 else 1


if __name__ == "__main__":
    sys.exit(main())
