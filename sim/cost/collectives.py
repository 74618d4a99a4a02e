"""Collective times: latency + payload / bus bandwidth per TP size, from a profile's `collectives`.

A profile without `collectives` falls back to the ring formula over `interconnect`
(`roofline.allreduce_time_s`). A measured table of the kind and TP size (`calibration.tables.allreduce`,
sim/cost/collective_tables.py) answers first. With fits, the TP size's own fit answers; a TP size that was not
measured takes the nearest measured one above (or the largest, for a larger group), which is the
conservative side for latency. `allreduce_kind` picks `nccl` or `custom` (the one-shot
all-reduce kernels of vLLM / TensorRT-LLM); `nvlink_bridge` a bridged TP-2 pair of PCIe cards.
"""

from __future__ import annotations

import numpy as np

from sim.cost.collective_tables import MeasuredLink, allreduce_tables
from sim.errors import InputError
from sim.inputs.hardware import HardwareProfile, LinkFit

Link = LinkFit | MeasuredLink  # a fitted latency + bandwidth, or a measured table

ALLREDUCE_KINDS = ("nccl", "custom", "auto", "engine")
# auto: per message, whichever is faster; engine: the engine preset's rule (`custom_allreduce`): its custom
# kernel where the engine enables it (group size, NVLink, message size), NCCL elsewhere


def _nearest_tp(fits: dict[int, LinkFit], tp: int) -> LinkFit:
    sizes = sorted(fits)
    above = [size for size in sizes if size >= tp]
    return fits[above[0] if above else sizes[-1]]


def allreduce_fit(hw: HardwareProfile, tp: int, kind: str = "nccl", nvlink_bridge: bool = False) -> Link | None:
    """The (latency, bandwidth) of an all-reduce over `tp` GPUs of `hw`, or its measured table where the
    profile has one for this kind and group size, or None when the profile has neither (the caller uses
    the ring formula)."""
    if kind not in ALLREDUCE_KINDS:
        raise InputError("allreduce_kind", kind, " | ".join(ALLREDUCE_KINDS))
    if kind in ("auto", "engine"):
        raise ValueError(f"{kind} is two fits: call allreduce_fits / engine_allreduce")
    coll = hw.collectives
    if nvlink_bridge:
        if coll is None or not coll.nvlink_bridge:
            raise InputError(hw.name, "collectives.nvlink_bridge", "bridge numbers in the profile to model a bridge")
        if tp != 2:
            raise InputError("nvlink_bridge", None, f"tp 2: a bridge joins a pair of cards (got tp {tp})")
        return coll.nvlink_bridge.get(kind) or coll.nvlink_bridge.get("nccl")
    if tp < 2:
        return None
    table = allreduce_tables(hw.calibration, hw.name).get((kind, tp))
    if table is not None:  # measured at this kind and group size (sim/cost/collective_tables.py)
        return table
    fits = coll.allreduce.get(kind) if coll is not None else None
    if not fits:  # no such kind measured: NCCL's numbers answer
        return allreduce_fit(hw, tp, "nccl") if kind != "nccl" else None
    return _nearest_tp(fits, tp)


def allreduce_fits(hw: HardwareProfile, tp: int, kind: str = "nccl", nvlink_bridge: bool = False) -> list[Link]:
    """The fits an all-reduce of `kind` may use: one for nccl/custom; for `auto` both, of which
    each message takes the faster (vLLM uses its custom kernel below a size limit and NCCL above;
    TensorRT-LLM's AUTO strategy picks per message). Empty without collective fits."""
    kinds = ("nccl", "custom") if kind == "auto" else (kind,)
    fits = [allreduce_fit(hw, tp, k, nvlink_bridge) for k in kinds]
    return [f for f in fits if f is not None]


def link_time_s(payload_bytes: np.ndarray, fit: Link) -> np.ndarray:
    """latency + payload / bandwidth (the `above` fit from `above_bytes` on), 0 where the payload is 0;
    a measured table's own interpolation where `fit` is one."""
    if isinstance(fit, MeasuredLink):
        return fit.time_at_s(payload_bytes)
    payload = np.asarray(payload_bytes, dtype=np.float64)
    time = fit.latency_us * 1e-6 + payload / (fit.bus_gb_s * 1e9)
    if fit.above is not None:
        time = np.where(payload >= fit.above_bytes, link_time_s(payload, fit.above), time)
    return np.where(payload > 0, time, 0.0)


def custom_enabled(hw: HardwareProfile, tp: int, rule) -> bool:
    """Whether an engine with this `custom_allreduce` rule (sim.inputs.engines.preset.CustomAllreduce) runs its
    custom kernel on a group of `tp` GPUs of `hw`: a supported group size, and all GPUs NVLink-connected
    or few enough for the PCIe path (vLLM: world size 2); and all on one node (its peers' buffers are
    shared by CUDA IPC: vLLM disables the kernel for a group that spans nodes, as TP 8 over two 4-GPU
    GB200 trays does inside one NVLink domain)."""
    if tp not in rule.world_sizes or tp > hw.interconnect.max_gpus_per_node:
        return False
    return hw.interconnect.gpu_link_kind == "nvlink" or tp <= rule.pcie_max_world_size


def engine_allreduce(hw: HardwareProfile, tp: int, rule) -> tuple[Link | None, Link | None, float]:
    """(custom fit or None where the engine would not use it, NCCL fit, the largest message in bytes the
    custom kernel takes). Fits are None when the profile has no collective measurements."""
    nccl = allreduce_fit(hw, tp, "nccl")
    custom = allreduce_fit(hw, tp, "custom") if custom_enabled(hw, tp, rule) else None
    if custom is nccl:  # the profile has no custom fit: NCCL numbers answer both
        custom = None
    return custom, nccl, float(rule.max_bytes_for(tp))
