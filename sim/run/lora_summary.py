"""summary.json's `lora` block (docs/lora.md): adapter hit rate, loads, load time share, waits for a slot."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from sim.inputs.lora import LORA_BYTES_PER_EL, slot_bytes_per_gpu
from sim.inputs.model import load_model

if TYPE_CHECKING:
    from sim.run.simulate import SimResult


def lora_summary(result: SimResult, table: Mapping[str, np.ndarray]) -> dict:
    """Counters summed over replicas. gpu_hit_rate: admissions of an adapter request whose adapter already
    had a GPU slot; load_time_share: adapter load seconds / (simulated seconds x replicas)."""
    cfg = result.cfg
    parts = [replica.sched.lora.facts() for replica in result.replicas if getattr(replica.sched, "lora", None)]
    admissions = sum(p["admissions"] for p in parts)
    hits = sum(p["gpu_hits"] for p in parts)
    host, disk = sum(p["host_loads"] for p in parts), sum(p["disk_loads"] for p in parts)
    load_s = sum(p["load_s"] for p in parts)
    span_s = result.sim_duration_s * max(len(parts), 1)
    out = {
        "max_loras": cfg.max_loras, "max_lora_rank": cfg.max_lora_rank, "max_cpu_loras": cfg.cpu_lora_slots,
        "slot_gib_per_gpu": slot_bytes_per_gpu(load_model(cfg.model), cfg.max_loras, cfg.max_lora_rank, cfg.tp,
                                               LORA_BYTES_PER_EL) / 2**30,
        "admissions": admissions,
        "gpu_hit_rate": hits / admissions if admissions else None,
        "loads": host + disk, "host_loads": host, "disk_loads": disk,
        "loads_per_s": (host + disk) / result.sim_duration_s if result.sim_duration_s > 0 else None,
        "load_s": load_s,
        "load_time_share": load_s / span_s if span_s > 0 else None,
        "max_batch_adapters": max((p["max_batch_adapters"] for p in parts), default=0),
        "max_slots_used": max((p["max_slots_used"] for p in parts), default=0),
    }
    if "adapter_wait_s" in table:
        adapter = np.asarray(table["adapter"])
        waits = np.asarray(table["adapter_wait_s"])[(adapter >= 0) & (np.asarray(table["status"]) == "FINISHED")]
        if waits.size:
            p50, p99 = np.percentile(waits, [50, 99])
            out["adapter_wait_s"] = {"mean": float(waits.mean()), "p50": float(p50), "p99": float(p99),
                                     "max": float(waits.max()), "share_waited": float((waits > 0).mean())}
    return out
