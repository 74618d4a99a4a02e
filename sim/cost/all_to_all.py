"""MoE all-to-all: the time of one dispatch or combine over `ep` expert-parallel ranks.

**Payload** (what every function here takes): the bytes ONE EP rank sends in the phase, counted
logically as DeepEP counts its bandwidths: every routed copy of a token, local ones included,

    dispatch: tokens_on_rank * top_k * (hidden * bytes per element + scale bytes per token)
    combine:  tokens_on_rank * top_k * hidden * bytes per element (bf16 in DeepEP's tests)

(`a2a_payload_bytes`). Check of the convention: DeepEP V1 low-latency dispatch, EP 8, 128 tokens,
top-8, hidden 7168 in FP8 with one fp32 scale per 128 channels: 128 * 8 * 7392 B in 77 us = 98 GB/s,
the bandwidth DeepEP reports.

**Backends** (`A2A_BACKENDS`): `deepep_normal` (high-throughput kernels: prefill), `deepep_low_latency`
(decode), `nccl` (grouped send/recv). A profile's `all_to_all` holds fits per backend, phase and
EP size, `latency_us + payload / bus_gb_s`. An EP size not measured takes the nearest measured one
above it *of the same placement* (inside one scale-up domain, or across domains; the
conservative side), else the largest of that placement. A DeepEP backend without a fit of the
right placement is refused (no substitute is priced). `nccl` without fits is priced analytically:

    t = alpha + max( (g-1)/ep * P / B_link ,  (ep-g)/ep * P / B_net )

each rank sends P/ep to each of its ep-1 peers at once (NCCL's all-to-all is a group of send/recv
pairs), g = min(ep, domain) of them in its scale-up domain over NVLink (`gpu_link_gb_s`), the rest
over its NIC (`network_gb_s`), both at line rate; alpha is the link's latency (the NIC's once the
group leaves the domain). The alpha-beta exchange cost is that of Thakur, Rabenseifner and Gropp,
IJHPCA 2005, with all pairs in flight at once.
"""

from __future__ import annotations

import numpy as np

from sim.cost.collectives import allreduce_fit, link_time_s
from sim.cost.roofline import allreduce_time_s
from sim.cost.topology import network_link
from sim.errors import InputError
from sim.inputs.hardware import A2A_BACKENDS, A2A_PHASES, HardwareProfile, LinkFit


def a2a_payload_bytes(tokens_per_rank, top_k: int, hidden: int, bytes_per_element: float,
                      scale_bytes_per_token: float = 0.0) -> np.ndarray:
    """Bytes one EP rank sends in a dispatch (or, with scale 0, a combine) of `tokens_per_rank`."""
    tokens = np.asarray(tokens_per_rank, dtype=np.float64)
    return tokens * top_k * (hidden * bytes_per_element + scale_bytes_per_token)


def all_to_all_fit(hw: HardwareProfile, ep: int, backend: str, phase: str) -> LinkFit | None:
    """The profile's fit for this backend, phase and EP size (module docstring), or None."""
    _check(backend, phase, ep)
    fits = ((hw.all_to_all or {}).get(backend) or {}).get(phase) or {}
    inside = ep <= hw.scale_up_gpus
    same_placement = sorted(size for size in fits if (size <= hw.scale_up_gpus) == inside)
    if not same_placement:
        return None
    above = [size for size in same_placement if size >= ep]
    return fits[above[0] if above else same_placement[-1]]


def analytic_all_to_all_s(payload_bytes, ep: int, hw: HardwareProfile) -> np.ndarray:
    """The grouped send/recv exchange at line rates (module docstring); 0 where the payload is 0."""
    payload = np.asarray(payload_bytes, dtype=np.float64)
    if ep <= 1:
        return np.zeros_like(payload)
    local = min(ep, hw.scale_up_gpus)
    time = (local - 1) / ep * payload / hw.gpu_link_bytes_s
    latency_s = hw.interconnect.gpu_link_latency_us * 1e-6
    if ep > local:
        net_bytes_s, latency_s = network_link(hw, f"an all-to-all over --ep {ep}")
        time = np.maximum(time, (ep - local) / ep * payload / net_bytes_s)
    return np.where(payload > 0, latency_s + time, 0.0)


def all_to_all_time_s(hw: HardwareProfile, ep: int, payload_bytes, backend: str = "nccl",
                      phase: str = "dispatch") -> np.ndarray:
    """Time of one `phase` of a MoE all-to-all over `ep` ranks when each sends `payload_bytes`
    (`a2a_payload_bytes`), vectorized over payloads; 0 for ep 1 or an empty payload."""
    _check(backend, phase, ep)
    payload = np.asarray(payload_bytes, dtype=np.float64)
    if ep == 1:
        return np.zeros_like(payload)
    fit = all_to_all_fit(hw, ep, backend, phase)
    if fit is not None:
        return link_time_s(payload, fit)
    if backend == "nccl":
        return analytic_all_to_all_s(payload, ep, hw)
    where = "inside one" if ep <= hw.scale_up_gpus else "across"
    raise InputError(hw.name, f"all_to_all.{backend}.{phase}",
                     f"no fit for EP {ep} {where} {hw.scale_up_gpus}-GPU scale-up domain(s): add one from a "
                     "benchmark, or use the nccl backend")


def _check(backend: str, phase: str, ep: int) -> None:
    if backend not in A2A_BACKENDS:
        raise InputError("--moe-a2a-backend", backend, " | ".join(A2A_BACKENDS))
    if phase not in A2A_PHASES:
        raise ValueError(f"phase {phase!r}: {' | '.join(A2A_PHASES)}")
    if ep < 1:
        raise InputError("--ep", None, f"a positive number of ranks (got {ep})")


def allgather_reducescatter_time_s(hw: HardwareProfile, ep: int, buffer_bytes, phase: str = "dispatch") -> np.ndarray:
    """MoE dispatch as an all-gather and combine as a reduce-scatter over `ep` GPUs of one scale-up
    domain (TensorRT-LLM's attention-DP MoE without an all-to-all path; vLLM's `allgather_reducescatter`
    all2all backend): `buffer_bytes` is the whole gathered buffer, every rank's tokens (dispatch), or
    the partial outputs each GPU reduces (combine). Priced as half a ring all-reduce of the same
    buffer, latency and bandwidth: a ring all-reduce is a reduce-scatter followed by an all-gather,
    each moving (ep-1)/ep of it per GPU. From the profile's NCCL all-reduce fit, else the ring formula."""
    if phase not in A2A_PHASES:
        raise ValueError(f"phase {phase!r}: {' | '.join(A2A_PHASES)}")
    payload = np.asarray(buffer_bytes, dtype=np.float64)
    if ep <= 1:
        return np.zeros_like(payload)
    if ep > hw.scale_up_gpus:
        raise InputError("--moe-a2a-backend", "allgather_reducescatter",
                         f"an all-gather over --ep {ep} GPUs beyond the {hw.scale_up_gpus}-GPU scale-up domain "
                         "is not simulated: use nccl or deepep")
    fit = allreduce_fit(hw, ep, "nccl")
    if fit is not None:
        return 0.5 * link_time_s(payload, fit)
    latency_s = hw.interconnect.gpu_link_latency_us * 1e-6
    return 0.5 * allreduce_time_s(payload, ep, hw.gpu_link_bytes_s, latency_s, hw.efficiency)
