"""Wiring of a disaggregated cluster: one config per group (the run's config with the group's
knobs on top), P prefill replicas then D decode replicas (replica ids 0..P-1, P..P+D-1), the
coordinator and the KV link between them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pydantic import ValidationError

from sim.disagg.coordinator import Coordinator, DecodeHorizon
from sim.disagg.link import resolve_link
from sim.disagg.roles import DecodeRole, PrefillRole
from sim.engine import Replica
from sim.engines.apply import fit_inherited_to_policy
from sim.errors import InputError
from sim.hardware import GIB, load_hardware
from sim.kv.blocks import BlockManager
from sim.router import make_router
from sim.sched.registry import scheduler_class
from sim.spec_decode import make_spec_decoder

DECODE_ROUTER_STREAM = 0xDEC0DE  # the decode router's own random stream


@dataclass
class DisaggCluster:
    prefill: list[Replica]
    decode: list[Replica]
    coordinator: Coordinator
    blocks_per_replica: list[int]
    first_memory: object
    n_gpus: int
    groups: dict

    @property
    def replicas(self) -> list[Replica]:
        return [*self.prefill, *self.decode]

    def summary(self) -> dict:
        return {"n_gpus": self.n_gpus, **self.groups, **self.coordinator.summary()}


def group_config(cfg, role: str):
    """The run's config with the group's own knobs (hardware, TP, policy, budgets) on top."""
    from sim.config import EngineConfig

    own = getattr(cfg, role).model_dump(exclude_none=True)
    # run-wide knobs (e.g. from an engine preset) that the group's own policy or budget does not take
    data = fit_inherited_to_policy({**cfg.model_dump(), **own}, own)
    data.update(replicas=1, replica_hardware=None)
    if role == "prefill":
        data["spec_tokens"] = 0  # a prefill replica never decodes
    try:
        return EngineConfig.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        raise InputError(f"{role} group (--{role}-* / `{role}:`)", None,
                         first["msg"].removeprefix("Value error, ")) from None


def check_disagg_config(cfg, table) -> None:
    if cfg.replicas != 1 or cfg.replica_hardware is not None:
        raise InputError("--replicas", None, "a disaggregated cluster is sized by --prefill-replicas and "
                         "--decode-replicas (hardware by --prefill-hardware / --decode-hardware)")
    if table.children:
        raise InputError("--prefill-replicas", None, "disaggregated runs need one sample per request; the "
                         "workload asks for parallel sampling (n > 1)")
    if cfg.policy == "static":
        raise InputError("--policy", None, "disaggregated groups run continuous, chunked or radix")


def build_disaggregated(cfg, model, env, table, recorder, source, max_model_len: int, cost_override,
                        replica_parts) -> DisaggCluster:
    """Replicas of both groups and their coordinator; `replica_parts(cfg, model, hw, cost)` gives a
    group's memory plan and cost model (sim.simulate)."""
    check_disagg_config(cfg, table)
    configs = {role: group_config(cfg, role) for role in ("prefill", "decode")}
    counts = {"prefill": cfg.prefill_replicas, "decode": cfg.decode_replicas}
    hardware = {role: load_hardware(c.hardware) for role, c in configs.items()}
    n_gpus = sum(counts[r] * configs[r].tp for r in counts)
    link = resolve_link(hardware["prefill"], hardware["decode"], n_gpus, configs["prefill"].tp,
                        configs["decode"].tp, cfg.kv_transfer_gb_s, cfg.kv_transfer_latency_us)
    router = make_router(cfg.decode_router, np.random.default_rng([cfg.seed, DECODE_ROUTER_STREAM]))
    coordinator = Coordinator(env, table, link, router, recorder.attribution)
    horizon = DecodeHorizon(env, source, coordinator)
    built: dict[str, list[Replica]] = {"prefill": [], "decode": []}
    blocks_per_replica, first_memory, index = [], None, 0
    for role, role_class in (("prefill", PrefillRole), ("decode", DecodeRole)):
        group_cfg = configs[role]
        memory, cost = replica_parts(group_cfg, model, group_cfg.hardware, cost_override)
        first_memory = first_memory or memory
        cls = type(f"{role.title()}{scheduler_class(group_cfg).__name__}", (role_class, scheduler_class(group_cfg)),
                   {})
        for _ in range(counts[role]):
            n_blocks = group_cfg.num_gpu_blocks_override or memory.num_gpu_blocks
            cpu_blocks = int(group_cfg.swap_space * GIB // (group_cfg.block_size * memory.kv_bytes_per_token_per_gpu))
            blocks = BlockManager(n_blocks, group_cfg.block_size, int(group_cfg.watermark * n_blocks), cpu_blocks)
            sched = cls(group_cfg, table, blocks, cost, recorder, index, max_model_len)
            sched.spec = make_spec_decoder(group_cfg, cost, index) if role == "decode" else None
            built[role].append(Replica(env, sched, source if role == "prefill" else horizon))
            blocks_per_replica.append(n_blocks)
            index += 1
    coordinator.attach(built["prefill"], built["decode"])
    groups = {f"{role}_{key}": value for role, c in configs.items()
              for key, value in (("replicas", counts[role]), ("hardware", c.hardware), ("tp", c.tp),
                                 ("policy", c.policy))}
    return DisaggCluster(built["prefill"], built["decode"], coordinator, blocks_per_replica, first_memory, n_gpus,
                         groups)
