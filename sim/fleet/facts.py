"""Fleet facts: storage bandwidth, MTBF, repair time and prices per hardware profile; engine
start-up and CUDA-graph capture time per engine (bundled `facts.yaml`, each with its source), and
the cold start they price.

cold start = weight bytes per GPU / min(storage read bandwidth, the profile's host link)
             + engine start-up + CUDA-graph capture (0 with enforce_eager)
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from sim.errors import InputError
from sim.inputs.config import EngineConfig
from sim.schema import Plausible, StrictModel
from sim.yamlio import read_mapping, validate

FACTS_PATH = Path(__file__).with_name("facts.yaml")


class Prices(StrictModel):
    on_demand: Plausible("fleet_price_usd")  # $ per GPU-hour
    reserved: Plausible("fleet_price_usd")  # $ per GPU-hour, paid for every hour of the day
    spot: Plausible("fleet_price_usd")


class HardwareFacts(StrictModel):
    storage_read_gb_s: Plausible("storage_gb_s")
    storage_source: str = ""
    gpu_mtbf_h: Plausible("mtbf_h")
    mtbf_source: str = ""
    repair_s: Plausible("fleet_wait_s")
    repair_source: str = ""
    price_per_gpu_h: Prices
    price_source: str = ""
    spot_interruptions_per_h: Plausible("interruptions_per_h") = 0.0
    spot_source: str = ""


class EngineFacts(StrictModel):
    startup_s: Plausible("engine_startup_s")
    cuda_graph_capture_s: Plausible("engine_startup_s")
    source: str = ""


class FleetFacts(StrictModel):
    hardware: dict[str, HardwareFacts] = Field(default_factory=dict)
    engines: dict[str, EngineFacts] = Field(default_factory=dict)


def load_facts(overrides: dict | None = None, where: str = "fleet.facts") -> FleetFacts:
    """The bundled facts, with `overrides` (a FleetFacts-shaped mapping) replacing whole entries."""
    bundled = read_mapping(FACTS_PATH)
    for section, entries in (overrides or {}).items():
        if not isinstance(entries, dict):
            raise InputError(where, section, "must map names to their facts")
        bundled.setdefault(section, {}).update(entries)
    return validate(FleetFacts, bundled, where)


def hardware_facts(facts: FleetFacts, cfg: EngineConfig) -> HardwareFacts:
    if cfg.hardware not in facts.hardware:
        raise InputError("fleet.facts", f"hardware.{cfg.hardware}",
                         f"no fleet facts for this profile (bundled: {', '.join(sorted(facts.hardware))}); give them")
    return facts.hardware[cfg.hardware]


def engine_facts(facts: FleetFacts, cfg: EngineConfig) -> EngineFacts:
    name = cfg.engine or "none"
    if name not in facts.engines:
        raise InputError("fleet.facts", f"engines.{name}",
                         f"no start-up facts for this engine (bundled: {', '.join(sorted(facts.engines))}); give them")
    return facts.engines[name]


def cold_start_parts_s(facts: FleetFacts, cfg: EngineConfig, weight_bytes_per_gpu: int,
                       host_link_bytes_s: float) -> dict:
    """The cold start of one replica, by part (seconds): every GPU of a TP group loads its own
    shard in parallel, so the load is one GPU's bytes over the slower of storage and host link."""
    hw, engine = hardware_facts(facts, cfg), engine_facts(facts, cfg)
    load_bytes_s = min(hw.storage_read_gb_s * 1e9, host_link_bytes_s)
    parts = {"weights_load_s": weight_bytes_per_gpu / load_bytes_s, "engine_startup_s": engine.startup_s,
             "cuda_graph_capture_s": 0.0 if cfg.enforce_eager else engine.cuda_graph_capture_s}
    parts["total_s"] = sum(parts.values())
    return parts
