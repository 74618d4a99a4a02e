"""One replica's LoRA adapters as vLLM holds them (docs/lora.md): `max_loras` GPU slots, a host cache of
`max_cpu_loras` adapters, loads from host memory over the host link or from disk.

A batch holds at most `max_loras` distinct adapters (vLLM's scheduler skips a waiting request whose
adapter would make one more). Every adapter of a running request sits in a slot; a slot whose adapter no
running request uses stays loaded (a later request for it is a hit) until a new adapter needs the slot:
the least recently used unused slot is evicted (vLLM's LRU adapter manager). Loading an adapter copies its
A and B shards to the GPU (bytes / the profile's host_link_gb_s); an adapter not in the host cache is
first read from disk (whole adapter bytes / lora_disk_gb_s) and joins the cache (LRU)."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from sim.inputs.lora import adapter_elements_per_gpu

NO_ADAPTER = -1


class AdapterSlots:
    def __init__(self, max_loras: int, cpu_slots: int, bytes_to_gpu, bytes_from_disk,
                 host_link_bytes_s: float, disk_bytes_s: float):
        self.max_loras, self.cpu_slots = max_loras, cpu_slots
        self._bytes_to_gpu, self._bytes_from_disk = bytes_to_gpu, bytes_from_disk  # rank -> bytes
        self.host_link_bytes_s, self.disk_bytes_s = host_link_bytes_s, disk_bytes_s
        self.gpu: OrderedDict[int, int] = OrderedDict()  # adapter -> rank, least recently used first
        self.cpu: OrderedDict[int, None] = OrderedDict()
        self.in_use: dict[int, int] = {}  # adapter -> running rows naming it
        self.n_admissions = self.n_gpu_hits = self.n_host_loads = self.n_disk_loads = 0
        self.load_s = 0.0
        self.max_slots_used = self.max_batch_adapters = 0

    def admissible(self, adapter: int) -> bool:
        """Whether a request naming `adapter` may join the batch now."""
        return adapter == NO_ADAPTER or adapter in self.in_use or len(self.in_use) < self.max_loras

    def admit(self, adapter: int, rank: int) -> float:
        """A request naming `adapter` joins the batch: seconds of the load it needs (0 on a hit)."""
        if adapter == NO_ADAPTER:
            return 0.0
        self.n_admissions += 1
        if adapter in self.gpu:
            self.n_gpu_hits += 1
            self.gpu.move_to_end(adapter)
            return 0.0
        if len(self.gpu) >= self.max_loras:
            victim = next(a for a in self.gpu if a not in self.in_use)  # exists: admissible() held
            del self.gpu[victim]
        seconds = self._bytes_to_gpu(rank) / self.host_link_bytes_s
        if adapter in self.cpu:
            self.n_host_loads += 1
            self.cpu.move_to_end(adapter)
        else:
            self.n_disk_loads += 1
            seconds += self._bytes_from_disk(rank) / self.disk_bytes_s
            self.cpu[adapter] = None
            if len(self.cpu) > self.cpu_slots:
                self.cpu.popitem(last=False)
        self.gpu[adapter] = rank
        self.max_slots_used = max(self.max_slots_used, len(self.gpu))
        self.load_s += seconds
        return seconds

    def join(self, adapter: int) -> None:
        if adapter != NO_ADAPTER:
            self.in_use[adapter] = self.in_use.get(adapter, 0) + 1

    def leave(self, adapter: int) -> None:
        if adapter != NO_ADAPTER:
            left = self.in_use[adapter] - 1
            if left:
                self.in_use[adapter] = left
            else:
                del self.in_use[adapter]

    def facts(self) -> dict:
        return {"admissions": self.n_admissions, "gpu_hits": self.n_gpu_hits, "host_loads": self.n_host_loads,
                "disk_loads": self.n_disk_loads, "load_s": self.load_s, "max_slots_used": self.max_slots_used,
                "max_batch_adapters": self.max_batch_adapters, "max_loras": self.max_loras}


def adapter_slots_of(cfg, cost) -> AdapterSlots:
    """The slots of a replica with this config and cost model (its model, TP and host link)."""
    model, el = cost.model, cost.act_bytes_el

    def to_gpu(rank: int) -> float:
        return adapter_elements_per_gpu(model, rank or cfg.max_lora_rank, cfg.tp) * el

    def from_disk(rank: int) -> float:
        return adapter_elements_per_gpu(model, rank or cfg.max_lora_rank, 1) * el

    return AdapterSlots(cfg.max_loras, cfg.cpu_lora_slots, to_gpu, from_disk, cost.hw.host_link_bytes_s,
                        cfg.lora_disk_gb_s * 1e9)


def row_adapters(table) -> tuple[np.ndarray, np.ndarray]:
    """(adapter, rank) of every row of the request table (a sample row: its request's); -1 / 0 without."""
    extra = table.trace.extra
    n = table.sample_of.shape[0]
    if "adapter" not in extra:
        return np.full(n, NO_ADAPTER, dtype=np.int64), np.zeros(n, dtype=np.int64)
    ranks = extra.get("adapter_rank", np.zeros(len(table.trace), dtype=np.int64))
    return (np.asarray(extra["adapter"], dtype=np.int64)[table.sample_of],
            np.asarray(ranks, dtype=np.int64)[table.sample_of])
