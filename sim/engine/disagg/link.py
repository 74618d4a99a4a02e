"""The link that carries KV blocks from a prefill replica to a decode replica.

Bandwidth and latency come from the hardware profiles: NVLink (`gpu_link_gb_s`) when every GPU of
the cluster fits in one scale-up domain of the same hardware (a node; a GB200 NVL72 rack), else the scale-out
NIC (`network_gb_s`, RDMA
over InfiniBand/RoCE). `kv_transfer_gb_s` / `kv_transfer_latency_us` override them.

Each prefill GPU sends its own KV shard, in parallel with its TP peers, so a transfer of B bytes
(the whole model's KV of the blocks moved) takes latency + B / (link bandwidth x min(tp_P, tp_D)),
tp being an attention rank's TP under data-parallel attention (a transfer goes from one prefill
rank to one decode rank: sim/engine/disagg/build.py). A prefill replica (rank) sends one transfer at a time
(FIFO); transfers of different ones overlap.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.errors import InputError
from sim.inputs.hardware import HardwareProfile


@dataclass(frozen=True)
class KVLink:
    bytes_s: float  # per GPU pair, per direction
    latency_s: float
    kind: str  # "nvlink" | "network" | "override"
    n_parallel: int  # GPU pairs sending at once (min of the two groups' attention TP)

    def transfer_s(self, n_bytes: float) -> float:
        return self.latency_s + n_bytes / (self.bytes_s * self.n_parallel)


def resolve_link(prefill_hw: HardwareProfile, decode_hw: HardwareProfile, n_gpus: int, tp_prefill: int,
                 tp_decode: int, override_gb_s: float | None, override_latency_us: float | None) -> KVLink:
    """The KV link of a P/D cluster of `n_gpus` GPUs in all (see the module docstring)."""
    n_parallel = min(tp_prefill, tp_decode)
    one_node = prefill_hw.name == decode_hw.name and n_gpus <= prefill_hw.scale_up_gpus
    if one_node:
        gb_s, latency_us, kind = prefill_hw.interconnect.gpu_link_gb_s, prefill_hw.interconnect.gpu_link_latency_us, \
            "nvlink"
    else:
        nets = [hw.interconnect.network_gb_s for hw in (prefill_hw, decode_hw)]
        lats = [hw.interconnect.network_latency_us for hw in (prefill_hw, decode_hw)]
        gb_s = None if None in nets else min(nets)
        latency_us = None if None in lats else max(lats)
        kind = "network"
    if override_gb_s is not None:
        gb_s, kind = override_gb_s, "override"
    if override_latency_us is not None:
        latency_us = override_latency_us
    if gb_s is None or latency_us is None:
        raise InputError("--kv-transfer-gb-s", None,
                         f"the cluster ({n_gpus} GPUs) spans nodes and profile {prefill_hw.name!r} or "
                         f"{decode_hw.name!r} has no network_gb_s/network_latency_us: give "
                         "--kv-transfer-gb-s and --kv-transfer-latency-us")
    return KVLink(gb_s * 1e9, latency_us * 1e-6, kind, n_parallel)
