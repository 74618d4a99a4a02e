"""All-reduce timing across tensor-parallel ranks with torch.distributed.

One process per rank (torch.multiprocessing.spawn), NCCL on CUDA, gloo on CPU (gloo is
what the CPU test uses; calibration only measures all-reduce on more than one GPU).
Rank 0 times each payload: barrier, then the all-reduce between CUDA events (on CPU a
monotonic host timer), repeated; it writes the per-repeat times to a JSON file that the
parent reads back.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


@dataclass(frozen=True)
class AllReduceTiming:
    payload_bytes: int
    world_size: int
    time_s: float
    time_std_s: float
    n_repeats: int


def unavailable_reason(device: str) -> str | None:
    """Why all-reduce cannot be measured on `device`, or None when it can."""
    if not dist.is_available():
        return "torch.distributed is not available in this torch build"
    if device != "cuda":
        return "all-reduce is measured only across GPUs (device is not cuda)"
    n_gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if n_gpus < 2:
        return f"all-reduce needs at least 2 GPUs; {n_gpus} visible"
    if not dist.is_nccl_available():
        return "NCCL is not available in this torch build"
    return None


def _time_one(tensor: torch.Tensor, n_warmup: int, n_repeats: int) -> list[float]:
    for _ in range(n_warmup):
        dist.all_reduce(tensor)
    times_s = []
    for _ in range(n_repeats):
        dist.barrier()
        if tensor.is_cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            dist.all_reduce(tensor)
            end.record()
            end.synchronize()
            times_s.append(start.elapsed_time(end) / 1000.0)
        else:
            started = time.perf_counter()
            dist.all_reduce(tensor)
            times_s.append(time.perf_counter() - started)
    return times_s


def _rank_main(rank: int, world_size: int, job: dict) -> None:
    """Entry point of one spawned rank (must stay module-level so spawn can pickle it)."""
    backend = job["backend"]
    if backend == "nccl":
        torch.cuda.set_device(rank)
    init = f"file://{job['rendezvous_path']}"
    dist.init_process_group(backend, init_method=init, rank=rank, world_size=world_size)
    try:
        device = f"cuda:{rank}" if backend == "nccl" else "cpu"
        dtype = getattr(torch, job["dtype"])
        element_bytes = torch.empty((), dtype=dtype).element_size()
        results = {}
        for payload_bytes in job["payloads_bytes"]:
            n_elements = max(1, payload_bytes // element_bytes)
            tensor = torch.randn(n_elements, dtype=dtype, device=device)
            results[payload_bytes] = _time_one(tensor, job["n_warmup"], job["n_repeats"])
        if rank == 0:
            Path(job["result_path"]).write_text(json.dumps(results))
    finally:
        dist.destroy_process_group()


def measure_allreduce(
    payloads_bytes: list[int],
    world_size: int,
    dtype: torch.dtype,
    backend: str = "nccl",
    n_warmup: int = 5,
    n_repeats: int = 20,
) -> list[AllReduceTiming]:
    """Median and spread of one all-reduce per payload size over `world_size` ranks.

    Spawns `world_size` processes and blocks until they finish; a rank's exception
    propagates. `backend` "nccl" puts rank r on cuda:r; "gloo" runs on CPU.
    """
    if world_size < 2:
        raise ValueError("all-reduce needs world_size >= 2")
    with tempfile.TemporaryDirectory(prefix="infersim-allreduce-") as tmp:
        job = {
            "backend": backend,
            "rendezvous_path": os.path.join(tmp, "rendezvous"),
            "result_path": os.path.join(tmp, "result.json"),
            "dtype": str(dtype).removeprefix("torch."),
            "payloads_bytes": list(payloads_bytes),
            "n_warmup": n_warmup,
            "n_repeats": n_repeats,
        }
        mp.spawn(_rank_main, args=(world_size, job), nprocs=world_size, join=True)
        raw = json.loads(Path(job["result_path"]).read_text())
    return [
        AllReduceTiming(
            payload_bytes=int(payload),
            world_size=world_size,
            time_s=statistics.median(times_s),
            time_std_s=statistics.pstdev(times_s),
            n_repeats=len(times_s),
        )
        for payload, times_s in raw.items()
    ]
