"""The max batch size and max num tokens `trtllm-bench throughput` picks for a run, written into the
TensorRT-LLM validation cases' `engine_args` (`max_num_seqs`, `max_num_batched_tokens`).

trtllm-bench (PyTorch backend, no --max_batch_size/--max_num_tokens given, as in the perf-overview
runs) sizes both per run from the KV capacity. Facts taken from NVIDIA/TensorRT-LLM
`tensorrt_llm/bench/build/tuning.py` (calc_engine_setting, finetune_setting) and
`tensorrt_llm/bench/benchmark/utils/general.py` (get_settings), read 2026-12-01, re-expressed here:
- weight bytes = param_count x bytes per weight (NVFP4 0.5, FP8 1) over all tp x pp GPUs' total memory;
- KV bytes per token = 2 x layers x max(tp, kv_heads) x head_dim x KV bytes (FP8 KV: 1);
- requests that fit = (total memory - weights) x kv_cache_free_gpu_mem_fraction / (bytes per token
  x (ISL + OSL)); the CLI default fraction is 0.90;
- batch_raw = min(requests, 4096) / pp; batch = batch_raw rounded up (to 32 with a floor of 64 below
  256, to 128 below 1024, else to 256); tokens = min(batch_raw x (1 + ISL / OSL), 32768) rounded up
  (to 256 with a floor of 2048 below 4096, to 512 below 8192, else to 1024);
- chunked prefill is off by default, so max num tokens is raised to at least ISL + max batch size.
Device memory is the profile's `memory.hbm_capacity_gib` (what the GPU reports).

With pipeline stages (pp > 1) both are per micro-batch: TensorRT-LLM's PyTorch executor
(`tensorrt_llm/_torch/pyexecutor/py_executor.py`, `_executor_loop_pp`) keeps pp micro-batches in
flight, scheduling each from the requests not in flight, up to max batch size / max num tokens
(hence tuning.py's division by pp). An infersim step covers every in-flight micro-batch (sim/cost/
pipeline.py), so a case's `max_num_seqs` / `max_num_batched_tokens` are pp x those
(`simulated_limits`); the `pp` column carries pp.

Run: python -m calibrate.trtllm_bench_settings FILE.csv [...]  (rewrites engine_args in place)
"""

from __future__ import annotations

import csv
import math
import sys
from pathlib import Path

from sim.inputs.hardware import load_hardware
from sim.inputs.model import load_model
from sim.inputs.model.params import total_params
from sim.validate.names import dtype_name, gpu_name, model_name

BYTES_PER_WEIGHT = {"fp4": 0.5, "nvfp4": 0.5, "fp8": 1.0, "bf16": 2.0, "fp16": 2.0}  # trtllm-bench's NVFP4: .5
BYTES_PER_KV = {"fp8": 1.0, "bf16": 2.0, "fp16": 2.0}
KV_CACHE_FREE_GPU_MEM_FRACTION = 0.90  # trtllm-bench throughput CLI default


def _round_batch(raw_bs: float) -> int:
    if raw_bs < 256:
        return max(64, 32 * math.ceil(raw_bs / 32))
    if raw_bs < 1024:
        return 128 * math.ceil(raw_bs / 128)
    return 256 * math.ceil(raw_bs / 256)


def _round_tokens(raw_tokens: float) -> int:
    if raw_tokens < 4096:
        return max(2048, 256 * math.ceil(raw_tokens / 256))
    if raw_tokens < 8192:
        return 512 * math.ceil(raw_tokens / 512)
    return 1024 * math.ceil(raw_tokens / 1024)


def bench_settings(model: str, gpu: str, tp: int, weight_dtype: str, kv_dtype: str, isl: int,
                   osl: int, pp: int = 1) -> tuple[int, int]:
    """(max_batch_size, max_num_tokens) trtllm-bench derives for one run of tp x pp GPUs (per
    micro-batch when pp > 1)."""
    spec, hw = load_model(model), load_hardware(gpu)
    gib = 1024**3
    kv_heads = max(tp, spec.n_kv_heads)
    per_token_gib = 2 * spec.n_layers * kv_heads * spec.head_dim * BYTES_PER_KV[kv_dtype] / gib
    weights_gib = total_params(spec) * BYTES_PER_WEIGHT[weight_dtype] / gib
    available_gib = hw.memory.hbm_capacity_gib * tp * pp - weights_gib
    requests = available_gib * KV_CACHE_FREE_GPU_MEM_FRACTION / (per_token_gib * (isl + osl))
    raw_bs = min(requests, 4096) / pp
    max_bs = _round_batch(raw_bs)
    max_tokens = _round_tokens(min(raw_bs * (1 + isl / osl), 32768))
    return max_bs, max(max_tokens, isl + max_bs)


def simulated_limits(max_batch_size: int, max_num_tokens: int, pp: int = 1) -> tuple[int, int]:
    """infersim's (max_num_seqs, max_num_batched_tokens) for trtllm-bench's per-micro-batch limits:
    one simulated step spans the pp micro-batches in flight."""
    return max_batch_size * pp, max_num_tokens * pp


def case_pp(row: dict) -> int:
    """A case row's pipeline stages (the optional `pp` column; 1 when absent or empty)."""
    return int(row.get("pp") or 1)


def rewrite(path: Path) -> None:
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    fields = list(rows[0])
    for row in rows:
        where = row["case_id"]
        pp = case_pp(row)
        bs, tokens = bench_settings(model_name(where, row["model"]), gpu_name(where, row["gpu"]), int(row["tp"]),
                                    dtype_name(where, "weight_dtype", row["weight_dtype"]),
                                    dtype_name(where, "kv_dtype", row["kv_dtype"]),
                                    int(row["input_len"]), int(row["output_len"]), pp)
        seqs, batched = simulated_limits(bs, tokens, pp)
        kept = [item for item in row["engine_args"].split()
                if item.partition("=")[0] not in ("max_num_seqs", "max_num_batched_tokens")]
        row["engine_args"] = " ".join([f"max_num_seqs={seqs}", f"max_num_batched_tokens={batched}", *kept])
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        rewrite(Path(arg))
