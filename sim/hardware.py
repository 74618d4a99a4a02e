"""Hardware profiles: datasheet numbers + efficiency terms, loaded from YAML and validated."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt

from sim.errors import InputError
from sim.paths import bundled_dir
from sim.yamlio import read_mapping, validate

GIB = 2**30
_STRICT = ConfigDict(extra="forbid", frozen=True)
Fraction = Field(gt=0, le=1)


class Compute(BaseModel):
    model_config = _STRICT
    dense_bf16_tflops: PositiveFloat
    dense_fp8_tflops: PositiveFloat | None = None
    dense_int8_tops: PositiveFloat | None = None


class Memory(BaseModel):
    model_config = _STRICT
    hbm_capacity_gib: PositiveFloat
    hbm_bandwidth_gb_s: PositiveFloat
    runtime_reserve_gib: float = Field(ge=0)


class Interconnect(BaseModel):
    model_config = _STRICT
    gpu_link_gb_s: PositiveFloat
    gpu_link_latency_us: float = Field(ge=0)
    host_link_gb_s: PositiveFloat
    max_gpus_per_node: PositiveInt
    # scale-out NIC per GPU (RDMA: InfiniBand/RoCE), per direction; None where no standard system is bundled
    network_gb_s: PositiveFloat | None = None
    network_latency_us: float | None = Field(None, ge=0)


class Efficiency(BaseModel):
    """Roofline efficiency terms (documented defaults in each YAML; calibration refits them)."""

    model_config = _STRICT
    gemm_compute_max: float = Fraction
    gemm_half_tokens: float = Field(ge=0)
    memory: float = Fraction
    attention_compute: float = Fraction
    paged_attention_memory: dict[PositiveInt, float]
    allreduce_bus: float = Fraction
    roofline_blend: float = Field(ge=1)
    kernel_launch_us: float = Field(ge=0)
    step_overhead_us: float = Field(ge=0)
    # Tile quantization of GEMM M in the compute term (M rounded up to a multiple of this);
    # None (the default) leaves M as is. Calibration may set it (see sim/cost/roofline.py).
    gemm_tile_tokens: PositiveInt | None = None

    def paged_efficiency(self, block_size: int) -> float:
        """KV-read efficiency for `block_size`, log2-interpolated between calibrated sizes."""
        import numpy as np

        sizes = sorted(self.paged_attention_memory)
        values = [self.paged_attention_memory[s] for s in sizes]
        return float(np.interp(np.log2(block_size), np.log2(sizes), values))


class HardwareProfile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    description: str = ""
    vendor: str = ""
    compute: Compute
    memory: Memory
    interconnect: Interconnect
    cost_per_hour_usd: PositiveFloat | None = None
    efficiency: Efficiency
    provenance: str
    calibration: dict | None = None

    @property
    def hbm_bytes(self) -> float:
        return self.memory.hbm_capacity_gib * GIB

    @property
    def hbm_bandwidth_bytes_s(self) -> float:
        return self.memory.hbm_bandwidth_gb_s * 1e9

    @property
    def gpu_link_bytes_s(self) -> float:
        return self.interconnect.gpu_link_gb_s * 1e9

    @property
    def host_link_bytes_s(self) -> float:
        return self.interconnect.host_link_gb_s * 1e9

    def peak_flops(self, peak_key: str) -> float:
        """Dense peak FLOP/s for a `compute` key; InputError if this GPU lacks it (e.g. fp8 on A100)."""
        value = getattr(self.compute, peak_key)
        if value is None:
            raise InputError(self.name, f"compute.{peak_key}", "this GPU has no such tensor-core peak")
        return value * 1e12


def bundled_profiles() -> list[str]:
    return sorted(p.stem for p in bundled_dir("hwprofiles").glob("*.yaml"))


@lru_cache(maxsize=64)
def load_hardware(name_or_path: str) -> HardwareProfile:
    """A bundled profile by name (`h100-sxm`) or a user's YAML by path."""
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        path = bundled_dir("hwprofiles") / f"{name_or_path}.yaml"
        if not path.is_file():
            allowed = ", ".join(bundled_profiles())
            raise InputError("--hardware", None, f"unknown profile {name_or_path!r}; bundled: {allowed}")
    elif not path.is_file():
        raise InputError(path, None, "file not found")
    return validate(HardwareProfile, read_mapping(path), path)
