"""Hardware profiles: datasheet numbers + efficiency terms, loaded from YAML and validated."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import ConfigDict, Field, PositiveFloat, PositiveInt, field_validator, model_validator

from sim.errors import InputError
from sim.inputs.efficiency import Efficiency
from sim.inputs.power import PowerModel
from sim.paths import bundled_dir
from sim.schema import Plausible, StrictModel
from sim.yamlio import read_mapping, validate

GIB = 2**30
_STRICT = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
Fraction = Field(gt=0, le=1)


class Compute(StrictModel):
    model_config = _STRICT
    dense_bf16_tflops: Plausible("tensor_tflops")
    dense_fp8_tflops: Plausible("tensor_tflops") | None = None
    dense_int8_tops: Plausible("tensor_tflops") | None = None
    dense_fp4_tflops: Plausible("tensor_tflops") | None = None  # Blackwell NVFP4/MXFP4 tensor cores
    # streaming multiprocessors (datasheet); calibration's GEMM wave model spreads output tiles over them
    n_sms: Plausible("sm_count", int) | None = None


class Memory(StrictModel):
    model_config = _STRICT
    hbm_capacity_gib: Plausible("hbm_gib")
    hbm_bandwidth_gb_s: Plausible("hbm_gb_s")
    runtime_reserve_gib: Plausible("reserve_gib")


class Interconnect(StrictModel):
    model_config = _STRICT
    gpu_link_gb_s: Plausible("link_gb_s")
    gpu_link_latency_us: Plausible("link_latency_us")
    host_link_gb_s: Plausible("link_gb_s")
    max_gpus_per_node: Plausible("gpus_per_node", int)
    # GPUs joined by one NVLink/NVSwitch (or xGMI) fabric: 8 on an HGX board, 72 on a GB200 NVL72
    # rack. None: one node (max_gpus_per_node). Collectives beyond it cross the scale-out network.
    scale_up_domain_gpus: Plausible("domain_gpus", int) | None = None
    # scale-out NIC per GPU (RDMA: InfiniBand/RoCE), per direction; None where no standard system is bundled
    network_gb_s: Plausible("link_gb_s") | None = None
    network_latency_us: Plausible("link_latency_us") | None = None
    # how the GPUs of a node are linked (engines enable custom all-reduce kernels on full NVLink only)
    gpu_link_kind: Literal["nvlink", "pcie", "xgmi"] | None = None


class LinkFit(StrictModel):
    """One collective on one group size: time = latency_us + payload / bus_gb_s (payload in bytes).
    `above` (with `above_bytes`): the fit of messages of at least that size, where the kernel
    switches algorithm (vLLM's custom all-reduce: one-shot below 512 KiB on 4 GPUs, two-shot above)."""

    model_config = _STRICT
    latency_us: Plausible("collective_latency_us")
    bus_gb_s: Plausible("link_gb_s")
    above_bytes: Plausible("message_bytes") | None = None
    above: LinkFit | None = None

    @model_validator(mode="after")
    def _above_comes_with_its_size(self) -> LinkFit:
        if (self.above is None) != (self.above_bytes is None):
            raise ValueError("above and above_bytes come together")
        return self


A2A_BACKENDS = ("nccl", "deepep_normal", "deepep_low_latency")  # MoE dispatch/combine kernels (sim/cost/all_to_all.py)
A2A_PHASES = ("dispatch", "combine")


class Collectives(StrictModel):
    """Measured (or derived) collective costs per TP size (sim/cost/collectives.py reads them).

    `allreduce` maps a kind (`nccl`, `custom`: vLLM/TRT-LLM one-shot kernels) to {tp: LinkFit};
    `send_recv` is one point-to-point transfer (pipeline stages, KV transfer); `nvlink_bridge`
    the all-reduce of a TP-2 pair joined by an NVLink bridge (PCIe cards), used when the cost
    model is built with `nvlink_bridge=True`."""

    model_config = _STRICT
    allreduce: dict[str, dict[PositiveInt, LinkFit]]
    send_recv: LinkFit | None = None
    nvlink_bridge: dict[str, LinkFit] | None = None


class HardwareProfile(StrictModel):
    model_config = _STRICT
    name: str
    description: str = ""
    vendor: str = ""
    # The GPU die (the bundled profile that carries its kernel ceilings, e.g. `b200`): a profile naming a
    # die and giving no `efficiency` takes the die's (`with_die_ceilings`); bundled profiles naming one
    # die hold equal ceilings (tests/test_die_ceilings.py). Rack-scale systems differ in interconnect,
    # memory and price, not in what the die's kernels reach.
    die: str | None = None
    # How a plan pays for this hardware: per GPU used, per whole node (a GB200 compute tray), or per
    # whole scale-up domain (an NVL72 rack); `plan --billing` overrides it (sim/planner/billing.py).
    billing: Literal["gpu", "node", "rack"] = "gpu"
    compute: Compute
    memory: Memory
    interconnect: Interconnect
    cost_per_hour_usd: Plausible("gpu_hour_usd") | None = None
    efficiency: Efficiency
    provenance: str
    calibration: dict | None = None
    # New in issue 10: collective fits, relative uncertainty (1 sigma, log scale) of each op
    # class's time, and where each group of numbers comes from (measured-fit | derived | guessed).
    collectives: Collectives | None = None
    uncertainty: dict[str, PositiveFloat] | None = None
    sources: dict[str, str] | None = None
    # MoE all-to-all fits: backend (A2A_BACKENDS) -> {dispatch | combine: {ep: LinkFit}}, the payload
    # being the bytes one EP rank sends (sim/cost/all_to_all.py); a key of its own so that
    # `calibrate.defaults --write`, which rewrites `collectives`, leaves it alone.
    all_to_all: dict[str, dict[str, dict[PositiveInt, LinkFit]]] | None = None
    # idle / board-limit watts and how draw rises with a step's utilisation (sim/inputs/power.py);
    # None: runs on this profile report no energy (docs/power.md)
    power: PowerModel | None = None

    @field_validator("all_to_all")
    @classmethod
    def _known_a2a(cls, table):
        """Backends and phases infersim prices; at least one EP size each."""
        for backend, phases in (table or {}).items():
            if backend not in A2A_BACKENDS:
                raise ValueError(f"unknown all-to-all backend {backend!r}; allowed: {', '.join(A2A_BACKENDS)}")
            for phase, fits in phases.items():
                if phase not in A2A_PHASES or not fits:
                    raise ValueError(f"{backend}: phases {' | '.join(A2A_PHASES)}, each with one or more EP sizes")
        return table

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
    def scale_up_gpus(self) -> int:
        """GPUs in one scale-up (NVLink) domain (sim/cost/topology.py)."""
        return self.interconnect.scale_up_domain_gpus or self.interconnect.max_gpus_per_node

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
    elif not path.exists():
        raise InputError(path, None, "file not found")  # a FIFO, device or folder: read_mapping names it
    return validate(HardwareProfile, with_die_ceilings(anchor_table_files(read_mapping(path), path.parent), path), path)


def anchor_table_files(data: dict, profile_dir: Path) -> dict:
    """`data` (a profile mapping) with each relative `calibration.tables.<table>.file` made absolute
    against the folder of the profile YAML that names it, or the bundled profiles' folder where the
    file is there and not beside the profile (sim/cost/gemm_grid.py and sim/cost/collective_tables.py
    read the files)."""
    calibration = data.get("calibration")
    tables = calibration.get("tables") if isinstance(calibration, dict) else None
    if not isinstance(tables, dict):
        return data
    anchored = {name: {**entry, "file": str(_table_file(profile_dir, entry["file"]))} for name, entry in tables.items()
                if isinstance(entry, dict) and isinstance(entry.get("file"), str)
                and not Path(entry["file"]).is_absolute()}  # fmt: skip
    if not anchored:
        return data
    return {**data, "calibration": {**calibration, "tables": {**tables, **anchored}}}


def _table_file(profile_dir: Path, name: str) -> Path:
    """`name` beside the profile, else among the bundled profiles' (a copy of a bundled profile, edited
    elsewhere, keeps reading the bundled table it names)."""
    beside, bundled = profile_dir / name, bundled_dir("hwprofiles") / name
    return bundled if not beside.is_file() and bundled.is_file() else beside


DIE_KEYS = ("efficiency", "uncertainty", "calibration")  # what a die's reference profile lends


def with_die_ceilings(data: dict, path: Path) -> dict:
    """`data` with its die's kernel ceilings when it names a die and gives no `efficiency`: the
    reference profile's `efficiency`, and its `uncertainty` / `calibration` where `data` has none, and
    its `sources` entries for those. The reference is the bundled profile named as the die, itself
    naming that die and giving its own efficiency (no chains)."""
    die = data.get("die")
    if die is None or "efficiency" in data:
        return data
    ref_path = bundled_dir("hwprofiles") / f"{die}.yaml"
    ref = anchor_table_files(read_mapping(ref_path), ref_path.parent) if ref_path.is_file() else {}
    if ref.get("die") != die or "efficiency" not in ref:
        raise InputError(path, "die", f"{die!r} is no bundled die reference (a profile named so, with `die: "
                                      f"{die}` and its own efficiency); give efficiency or a die among the bundled")
    merged = {**{key: ref[key] for key in DIE_KEYS if key in ref}, **data}
    own = data.get("sources") or {}
    lent = {key: value for key, value in (ref.get("sources") or {}).items()
            if key not in own and (key in DIE_KEYS or key in Efficiency.model_fields)}
    if lent:
        merged["sources"] = {**lent, **own}
    return merged
