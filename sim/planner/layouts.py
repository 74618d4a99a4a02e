"""The planner's layout search: which parallel layouts (sim/inputs/layout/parallel.py) of one replica are candidates.

A layout is written as engine knobs on top of a candidate's TP (vLLM's spelling, so `tp` is the
GPUs of one attention rank and a replica holds tp x pp x dp GPUs):
- TP x PP: `pp` stages of `tp` GPUs (experts, if any, split by TP like a dense MLP);
- expert parallel: `enable_expert_parallel` with `dp` attention ranks of `tp` GPUs each (dp 1: EP
  over the TP group; dp > 1: data-parallel attention, MoE layers expert-parallel over all dp x tp
  GPUs, what SGLang spells `--tp dp*tp --dp dp --enable-dp-attention --ep-size dp*tp`), with the
  MoE all-to-all on `moe_a2a_backend` (nccl, deepep in SGLang's `auto` mode, or vLLM's default
  `allgather_reducescatter`, within one scale-up domain).
The two spellings price identically (one attention rank's view, sim/cost/expert_parallel.py), so
the planner searches one of them and writes both engines' flags (sim/planner/launch_layout.py).

Not generated, because the simulator refuses them (sim/inputs/layout/config.py): PP together with EP,
data-parallel attention without EP, EP over part of a MoE group. Whatever else the simulator cannot
run (a dense model with EP, a profile without a DeepEP fit at that EP size, weights that do not fit)
is skipped by the candidate builder with the simulator's own reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sim.errors import InputError

LAYOUT_KNOBS = ("pp", "dp", "enable_expert_parallel", "moe_a2a_backend")
A2A_BACKENDS = ("nccl", "deepep", "allgather_reducescatter")  # the last: vLLM's default --all2all-backend
DEFAULT_MAX_REPLICA_GPUS = 72  # one GB200 NVL72 domain; a larger replica is rarely what anyone deploys
DEFAULT_MOE_DPS = (1, 2, 4, 8)  # attention DP ranks a MoE model's default layout search tries (with EP)


@dataclass(frozen=True)
class LayoutGrid:
    """What to search beyond TP: pipeline stages, expert parallelism (off / on), attention DP ranks
    (with EP only) and all-to-all backends (with EP only); replicas above `max_replica_gpus` GPUs
    are not generated."""

    pps: tuple[int, ...] = (1,)
    expert_parallel: tuple[bool, ...] = (False,)
    dps: tuple[int, ...] = (1,)
    a2a_backends: tuple[str, ...] = ("nccl",)
    max_replica_gpus: int = DEFAULT_MAX_REPLICA_GPUS

    def variants(self, tp: int) -> list[dict]:
        """The layout knobs of every layout on top of TP `tp`, in a fixed order ({} is plain TP)."""
        out: list[dict] = []
        for ep in self.expert_parallel:
            if not ep:
                out += [{} if pp == 1 else {"pp": pp} for pp in self.pps if tp * pp <= self.max_replica_gpus]
                continue
            for dp in self.dps:
                if tp * dp > self.max_replica_gpus or tp * dp == 1:
                    continue
                for backend in self.a2a_backends:
                    knobs: dict = {"enable_expert_parallel": True}
                    if dp > 1:
                        knobs["dp"] = dp
                    if backend != "nccl":
                        knobs["moe_a2a_backend"] = backend
                    out.append(knobs)
        return out

    def to_dict(self) -> dict:
        return {"pp": list(self.pps), "expert_parallel": list(self.expert_parallel), "dp": list(self.dps),
                "moe_a2a_backend": list(self.a2a_backends), "max_replica_gpus": self.max_replica_gpus,
                "not_generated": "DP attention without EP, EP over part of the MoE group (the simulator "
                                 "does not price them); PP with EP (priced, not searched yet)"}


def _ints(text: str, flag: str) -> tuple[int, ...]:
    values = []
    for item in (part.strip() for part in text.split(",")):
        if not item.isdigit() or int(item) < 1:
            raise InputError(flag, item or None, "comma-separated positive integers, e.g. 1,2,4")
        if int(item) not in values:
            values.append(int(item))
    return tuple(values)


def parse_layout_grid(pp: str | None, ep: str | None, dp: str | None, a2a: str | None,
                      max_replica_gpus: int | None) -> LayoutGrid | None:
    """The CLI's `--pp 1,2 --ep off,on --dp 1,8 --moe-a2a-backend nccl,deepep --max-replica-gpus 64`
    as a grid; None when none is given (plan searches TP only, within one node, as before)."""
    if all(v is None for v in (pp, ep, dp, a2a, max_replica_gpus)):
        return None
    eps: tuple[bool, ...] = (False,)
    if ep is not None:
        words = [w.strip().lower() for w in ep.split(",") if w.strip()]
        allowed = {"off": False, "on": True}
        if not words or any(w not in allowed for w in words):
            raise InputError("--ep", ep, "off, on or off,on (expert parallelism over the MoE layer's GPUs)")
        eps = tuple(dict.fromkeys(allowed[w] for w in words))
    dps = _ints(dp, "--dp") if dp is not None else (1,)
    if dp is not None and ep is None:
        eps = (False, True)  # attention DP ranks need EP: asking for them asks for EP layouts
    backends = tuple(dict.fromkeys(b.strip() for b in (a2a or "nccl").split(",") if b.strip()))
    if not backends or any(b not in A2A_BACKENDS for b in backends):
        raise InputError("--moe-a2a-backend", a2a, f"comma-separated, each one of {', '.join(A2A_BACKENDS)}")
    if max_replica_gpus is not None and max_replica_gpus < 1:
        raise InputError("--max-replica-gpus", str(max_replica_gpus), "a positive integer")
    return LayoutGrid(_ints(pp, "--pp") if pp is not None else (1,), eps, dps, backends,
                      max_replica_gpus or DEFAULT_MAX_REPLICA_GPUS)


def default_layouts(grid: LayoutGrid | None, layout_search: bool | None, model) -> LayoutGrid | None:
    """The grid `plan` searches: the one the layout flags gave; with none given, for a MoE model (or
    with --layout-search) EP off / on and DP-attention ranks DEFAULT_MOE_DPS on NCCL, as AIConfigurator
    searches them; None (plain TP) for a dense model or with --no-layout-search. Explicit flags win
    over --no-layout-search."""
    if grid is not None:
        return grid
    if layout_search is False or (layout_search is None and model.moe is None):
        return None
    return LayoutGrid(expert_parallel=(False, True), dps=DEFAULT_MOE_DPS)


def replica_gpus(cfg) -> int:
    """GPUs of one replica of `cfg` (tp x pp, x dp under vLLM-style data parallelism)."""
    return cfg.layout().n_gpus


def whole_nodes(replicas: int, gpus_per_replica: int, gpus_per_node: int) -> int:
    """Nodes the replicas occupy when none straddles two nodes needlessly (sim/inputs/layout/placement.py): a
    replica that fits in a node shares nodes with others, a larger one takes whole nodes."""
    if gpus_per_replica >= gpus_per_node:
        return replicas * math.ceil(gpus_per_replica / gpus_per_node)
    return math.ceil(replicas / (gpus_per_node // gpus_per_replica))


def layout_label(cfg) -> str:
    """'tp8', 'tp8 pp2', 'tp8 ep8', 'dp8 x tp1 ep8 deepep' (attention ranks x their TP, EP size)."""
    layout = cfg.layout()
    parts = [f"dp{layout.dp} x tp{layout.tp}" if layout.dp > 1 else f"tp{layout.tp}"]
    if layout.pp > 1:
        parts.append(f"pp{layout.pp}")
    if layout.uses_expert_parallel:
        parts.append(f"ep{layout.expert_parallel_size}")
        if cfg.moe_a2a_backend != "nccl":
            parts.append(cfg.moe_a2a_backend)
    return " ".join(parts)


def layout_fields(cfg) -> dict:
    """plan.json's `layout` of a row: the engine-neutral facts of the replica's layout."""
    layout = cfg.layout()
    return {"label": layout_label(cfg), "gpus_per_replica": layout.n_gpus, "attention_tp": layout.attention_tp,
            "attention_dp": layout.n_kv_ranks, "pp": layout.pp, "ep": layout.expert_parallel_size,
            "moe_a2a_backend": cfg.moe_a2a_backend if layout.uses_expert_parallel else None}
