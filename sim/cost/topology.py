"""Where a replica's GPUs sit, and what a transfer that leaves the scale-up domain costs.

A profile's scale-up domain (`interconnect.scale_up_domain_gpus`, else `max_gpus_per_node`) is
the set of GPUs one NVLink/NVSwitch fabric joins: 8 on an HGX board, 72 on a GB200 NVL72 rack.
Beyond it every GPU talks over its own scale-out NIC (`network_gb_s` per direction,
`network_latency_us`; rail-optimised, one NIC per GPU as on DGX/HGX systems).

A replica's GPUs are numbered 0..tp*pp-1 and placed on consecutive GPUs of consecutive domains
(stage s of a pipeline on GPUs [s*tp, (s+1)*tp)), so a TP group crosses a domain only when tp
exceeds the domain, and then fills whole domains.

**Hierarchical all-reduce** of S bytes over tp = n * g GPUs (n domains of g GPUs each):

    t = AR_g(S) + 2 (n-1) alpha_net + 2 (n-1)/n * (S / g) / B_net

AR_g(S) is the domain's own all-reduce of S over g GPUs (the profile's fitted collective for
g, else the ring formula): it stands for the intra-domain reduce-scatter and all-gather, whose
wire bytes, 2 (g-1)/g S, are an all-reduce's. Between them each GPU holds a 1/g shard and
all-reduces it with its peers of the other n-1 domains over its NIC, a ring of n: 2 (n-1)/n of
the shard on the wire and 2 (n-1) latency steps. The ring cost per step is the alpha-beta model
of Thakur, Rabenseifner and Gropp, "Optimization of Collective Communication Operations in
MPICH", IJHPCA 19(1), 2005 (reduce-scatter + all-gather); the two-level split is Horovod's
hierarchical all-reduce (HOROVOD_HIERARCHICAL_ALLREDUCE: NCCL reduce-scatter in the node, the
inter-node all-reduce of the shards, NCCL all-gather in the node). NIC bandwidth is taken at
its per-direction line rate (no efficiency factor: the optimistic side).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sim.errors import InputError
from sim.inputs.hardware import HardwareProfile


@dataclass(frozen=True)
class ScaleOut:
    """A collective group spanning `n_domains` scale-up domains of `gpus_per_domain` GPUs each."""

    n_domains: int
    gpus_per_domain: int
    bytes_s: float  # per GPU, per direction
    latency_s: float


def network_link(hw: HardwareProfile, why: str) -> tuple[float, float]:
    """(bytes/s, latency s) of one GPU's scale-out NIC; one line naming the fields when absent."""
    net = hw.interconnect
    if net.network_gb_s is None or net.network_latency_us is None:
        raise InputError(hw.name, "interconnect.network_gb_s",
                         f"{why} crosses the {hw.scale_up_gpus}-GPU scale-up domain: give network_gb_s and "
                         "network_latency_us (the per-GPU NIC) in the profile")
    return net.network_gb_s * 1e9, net.network_latency_us * 1e-6


def tp_scale_out(hw: HardwareProfile, tp: int) -> ScaleOut | None:
    """How a TP group of `tp` GPUs spans domains; None when it fits in one (the dense, one-node
    case: no change). A group larger than a domain must fill whole domains."""
    domain = hw.scale_up_gpus
    if tp <= domain:
        return None
    if tp % domain:
        raise InputError("--tp", None, f"a TP group over {hw.name}'s {domain}-GPU scale-up domains fills whole "
                         f"domains: a multiple of {domain} (got {tp})")
    bytes_s, latency_s = network_link(hw, f"--tp {tp}")
    return ScaleOut(tp // domain, domain, bytes_s, latency_s)


def scale_out_allreduce_s(payload_bytes: np.ndarray, plan: ScaleOut) -> np.ndarray:
    """The inter-domain part of the hierarchical all-reduce (module docstring): a ring of
    `n_domains` over each GPU's NIC on its 1/g shard of the payload; 0 where the payload is 0."""
    payload = np.asarray(payload_bytes, dtype=np.float64)
    n = plan.n_domains
    shard = payload / plan.gpus_per_domain
    time = 2 * (n - 1) * plan.latency_s + 2.0 * (n - 1) / n * shard / plan.bytes_s
    return np.where(payload > 0, time, 0.0)


def domain_of_gpu(gpu: int, hw: HardwareProfile) -> int:
    return gpu // hw.scale_up_gpus


def stage_boundaries_cross(hw: HardwareProfile, tp: int, pp: int) -> list[bool]:
    """For each of the pp-1 boundaries between consecutive pipeline stages, whether the hop
    leaves the scale-up domain (the last GPU of stage s and the first of stage s+1 differ)."""
    return [domain_of_gpu((s + 1) * tp - 1, hw) != domain_of_gpu((s + 1) * tp, hw) for s in range(pp - 1)]


def n_domains_spanned(hw: HardwareProfile, n_gpus: int) -> int:
    """Scale-up domains (nodes, racks) a replica of `n_gpus` consecutive GPUs occupies."""
    return math.ceil(n_gpus / hw.scale_up_gpus)
