"""Wiring of a disaggregated cluster: one config per group (the run's config with the group's
knobs on top), P prefill replicas then D decode replicas (replica ids 0..P-1, P..P+D-1), the
coordinator and the KV link between them.

Each group takes its own layout (`prefill:` / `decode:` keys tp, dp, ep, enable_dp_attention,
enable_expert_parallel, moe_a2a_backend, deepep_mode, ep_num_redundant_experts; sim/inputs/layout/config.py),
simulated as an aggregated replica of that layout is (sim/run/simulate.py): a data-parallel-attention
replica of d ranks is d schedulers, each with its own KV blocks (one rank's) and requests, stepping in
lockstep (sim/engine/lockstep.py); the MoE layers are priced expert-parallel (sim/cost/expert_parallel.py).
Then every rank is a "replica" of its role to the router and the coordinator: arrivals are dealt over
the prefill ranks, each finished prefill goes to one decode rank, and its KV moves rank to rank.
Under `moe_a2a_backend: deepep` with `deepep_mode: auto`, a group runs the kernels SGLang's auto picks
for its batches: normal kernels on prefill servers, low-latency ones on decode servers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pydantic import ValidationError

from sim.engine.disagg.coordinator import Coordinator, DecodeHorizon
from sim.engine.disagg.link import resolve_link
from sim.engine.disagg.roles import DecodeRole, PrefillRole
from sim.engine.kv.blocks import BlockManager
from sim.engine.lockstep import LockstepRank, group_ranks
from sim.engine.replica import Replica
from sim.engine.routers.registry import make_router
from sim.engine.sched.registry import scheduler_class
from sim.engine.spec_decode import make_spec_decoder
from sim.errors import InputError
from sim.inputs.engines.apply import fit_inherited_to_policy
from sim.inputs.hardware import GIB, load_hardware
from sim.inputs.layout.checks import simulated_layout
from sim.inputs.layout.placement import cluster_placement

DECODE_ROUTER_STREAM = 0xDEC0DE  # the decode router's own random stream
ROLES = ("prefill", "decode")
# SGLang's `--deepep-mode auto` resolves per forward batch: normal kernels when any sequence of the batch
# extends (prefills), low-latency ones otherwise (`DeepEPMode.resolve`, python/sglang/srt/layers/moe/utils.py).
# A prefill server's batches always extend; a decode server's never do.
ROLE_DEEPEP_MODE = {"prefill": "normal", "decode": "low_latency"}


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
    from sim.inputs.config import EngineConfig

    own = getattr(cfg, role).model_dump(exclude_none=True)
    # run-wide knobs (e.g. from an engine preset) that the group's own policy or budget does not take
    data = fit_inherited_to_policy({**cfg.model_dump(), **own}, own)
    data.update(replicas=1, replica_hardware=None)
    if role == "prefill":
        data["spec_tokens"] = 0  # a prefill replica never decodes
    if data.get("moe_a2a_backend") == "deepep" and data.get("deepep_mode") == "auto":
        data["deepep_mode"] = ROLE_DEEPEP_MODE[role]
    try:
        return EngineConfig.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        key = str(first["loc"][0]) if first["loc"] else None
        where = (f"--{role}-{key.replace('_', '-')}" if key in own else
                 f"{role} group (--{role}-* / `{role}:`)" + (f": {key}" if key else ""))
        raise InputError(where, None, first["msg"].removeprefix("Value error, ")) from None


def group_layout(cfg, role: str, group_cfg, model):
    """The group's simulated layout; a refusal names the group's own flag (--prefill-ep for --ep)
    when the knob is the group's own."""
    try:
        return simulated_layout(group_cfg, model)
    except InputError as error:
        knob = error.where.removeprefix("--")
        if knob.replace("-", "_") in getattr(cfg, role).model_dump(exclude_none=True):
            raise InputError(f"--{role}-{knob}", error.field, error.allowed) from None
        raise


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
    """Replicas (attention ranks, under data-parallel attention) of both groups and their
    coordinator; `replica_parts(cfg, model, hw, cost)` gives a group's memory plan and cost model
    (sim.run.simulate)."""
    check_disagg_config(cfg, table)
    configs = {role: group_config(cfg, role) for role in ROLES}
    layouts = {role: group_layout(cfg, role, c, model) for role, c in configs.items()}
    cluster_placement(cfg)  # refuses a --nodes too small for both groups, before anything runs
    counts = {"prefill": cfg.prefill_replicas, "decode": cfg.decode_replicas}
    hardware = {role: load_hardware(c.hardware) for role, c in configs.items()}
    n_gpus = sum(counts[r] * layouts[r].n_gpus for r in counts)
    link = resolve_link(hardware["prefill"], hardware["decode"], n_gpus, layouts["prefill"].attention_tp,
                        layouts["decode"].attention_tp, cfg.kv_transfer_gb_s, cfg.kv_transfer_latency_us)
    router = make_router(cfg.decode_router, np.random.default_rng([cfg.seed, DECODE_ROUTER_STREAM]))
    coordinator = Coordinator(env, table, link, router, recorder.attribution)
    horizon = DecodeHorizon(env, source, coordinator)
    built: dict[str, list[Replica]] = {"prefill": [], "decode": []}
    blocks_per_replica, first_memory, index = [], None, 0
    for role, role_class in (("prefill", PrefillRole), ("decode", DecodeRole)):
        group_cfg, group_source = configs[role], source if role == "prefill" else horizon
        memory, cost = replica_parts(group_cfg, model, group_cfg.hardware, cost_override)
        first_memory = first_memory or memory
        cls = type(f"{role.title()}{scheduler_class(group_cfg).__name__}", (role_class, scheduler_class(group_cfg)),
                   {})
        n_ranks = layouts[role].n_kv_ranks if model.moe is not None else 1
        replica_kind = Replica if n_ranks == 1 else LockstepRank  # data-parallel attention: ranks in lockstep
        for _ in range(counts[role] * n_ranks):
            n_blocks = group_cfg.num_gpu_blocks_override or memory.num_gpu_blocks
            cpu_blocks = int(group_cfg.swap_space * GIB // (group_cfg.block_size * memory.kv_bytes_per_token_per_gpu))
            blocks = BlockManager(n_blocks, group_cfg.block_size, int(group_cfg.watermark * n_blocks), cpu_blocks)
            sched = cls(group_cfg, table, blocks, cost, recorder, index, max_model_len)
            sched.spec = make_spec_decoder(group_cfg, cost, index) if role == "decode" else None
            built[role].append(replica_kind(env, sched, group_source))
            blocks_per_replica.append(n_blocks)
            index += 1
        if n_ranks > 1:
            group_ranks(env, built[role], n_ranks, group_source)
    coordinator.attach(built["prefill"], built["decode"])
    return DisaggCluster(built["prefill"], built["decode"], coordinator, blocks_per_replica, first_memory, n_gpus,
                         _groups_summary(configs, layouts, counts, hardware))


def _groups_summary(configs: dict, layouts: dict, counts: dict, hardware: dict) -> dict:
    """summary.json `disaggregation`'s per-group keys: replicas, hardware, TP, policy, the layout,
    GPUs and $/hour (replicas x GPUs per replica x the profile's cost_per_hour_usd; None without one)."""
    groups, total_usd = {}, 0.0
    for role, c in configs.items():
        layout = layouts[role]
        n_gpus = counts[role] * layout.n_gpus
        price = hardware[role].cost_per_hour_usd
        usd = None if price is None else n_gpus * price
        total_usd = None if usd is None or total_usd is None else total_usd + usd
        a2a = None if not layout.uses_expert_parallel else (
            c.moe_a2a_backend if c.moe_a2a_backend == "nccl" else f"deepep {c.deepep_mode}")
        groups.update({f"{role}_replicas": counts[role], f"{role}_hardware": c.hardware, f"{role}_tp": c.tp,
                       f"{role}_policy": c.policy, f"{role}_gpus": n_gpus, f"{role}_cost_per_hour_usd": usd,
                       f"{role}_layout": {"n_gpus_per_replica": layout.n_gpus, "attention_tp": layout.attention_tp,
                                          "dp": layout.dp, "ep": layout.expert_parallel_size,
                                          "enable_dp_attention": layout.enable_dp_attention,
                                          "n_kv_ranks": layout.n_kv_ranks,
                                          "n_redundant_experts": layout.n_redundant_experts, "moe_a2a": a2a}})
    groups["cost_per_hour_usd"] = total_usd
    return groups
