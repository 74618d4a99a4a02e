"""Planner candidates: hardware x TP (x layout) x policy, each one replica of one hardware kind.

A combination the engine cannot run (TP that does not split the heads, more GPUs than a scale-up
(NVLink) domain holds, weights that do not fit, a profile without a price) is skipped with its reason. With a
layout grid (sim/planner/layouts.py) each TP also takes the grid's PP / EP / DP-attention layouts,
whose knobs join the candidate's `knobs`; a layout is checked by the simulator's own layout and
memory rules (sim/inputs/layout/config.py, sim/inputs/layout/layout_memory.py), and TP may then span nodes.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.errors import InputError
from sim.inputs.config import POLICIES, EngineConfig
from sim.inputs.engines.apply import fit_inherited_to_policy
from sim.inputs.engines.preset import kv_pool_args
from sim.inputs.hardware import load_hardware
from sim.inputs.layout.checks import simulated_layout
from sim.inputs.layout.layout_memory import plan_layout_memory
from sim.inputs.layout.memory import RAISE_TP_HINT, plan_memory
from sim.inputs.model import load_model
from sim.planner.billing import Billing, billing_of
from sim.planner.layouts import LAYOUT_KNOBS, LayoutGrid, layout_label, replica_gpus
from sim.schema import plausible_check
from sim.yamlio import validate


@dataclass(frozen=True)
class Candidate:
    cfg: EngineConfig
    cost_per_gpu_hour_usd: float
    knobs: tuple[tuple[str, object], ...] = ()  # the searched engine knobs' values (empty: no knob search)
    gpus_per_node: int = 8  # the profile's node (interconnect.max_gpus_per_node): whole-node rounding
    billing: Billing = Billing("gpu", 1, "profile")  # how its GPUs are paid for (sim/planner/billing.py)

    @property
    def label(self) -> str:
        knobs = "".join(f" {k}={v}" for k, v in self.knobs if k not in LAYOUT_KNOBS)
        return f"{self.cfg.hardware} {layout_label(self.cfg)} {self.cfg.policy}{knobs}"

    @property
    def n_gpus(self) -> int:
        """GPUs of one replica (its layout's)."""
        return replica_gpus(self.cfg)

    def cost_per_hour_usd(self, replicas: int) -> float:
        """$ per hour of `replicas` replicas: the GPUs billed (`billing`) at the GPU-hour price."""
        return self.billing.billed_gpus(replicas, self.n_gpus) * self.cost_per_gpu_hour_usd


@dataclass(frozen=True)
class Skipped:
    hardware: str
    tp: int
    policy: str
    reason: str
    layout: str | None = None  # the layout label, when a layout grid was searched

    def to_dict(self) -> dict:
        row = {"hardware": self.hardware, "tp": self.tp, "policy": self.policy, "reason": self.reason}
        return row if self.layout is None else {**row, "layout": self.layout}


def parse_list(text: str, where: str) -> list[str]:
    """'a, b,c' -> ['a', 'b', 'c'] (order kept, duplicates dropped); empty -> InputError."""
    items = list(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    if not items:
        raise InputError(where, None, "give a comma-separated list, e.g. h100-sxm,h200")
    return items


def parse_tps(text: str) -> list[int]:
    values = []
    for item in parse_list(text, "--tp"):
        if not item.isdigit() or int(item) < 1:
            raise InputError("--tp", item, "must be positive integers, e.g. 1,2,4,8")
        values.append(int(item))
    return values


def parse_prices(texts: list[str] | None, hardware: list[str]) -> dict[str, float]:
    """`["h100-sxm=2.10"]` -> {"h100-sxm": 2.1} ($ per GPU-hour, overriding the profile's
    cost_per_hour_usd); each name must be one of `hardware`, each price a number > 0."""
    prices: dict[str, float] = {}
    for text in texts or []:
        name, sep, value = (part.strip() for part in text.partition("="))
        if not sep or name not in hardware:
            raise InputError("--price", text, f"expected PROFILE=USD_PER_GPU_HOUR with PROFILE one of --hardware "
                                              f"({', '.join(hardware)}), e.g. {hardware[0]}=2.10")
        try:
            price = float(value.removeprefix("$"))
        except ValueError:
            price = float("nan")
        if not price > 0 or price == float("inf"):
            raise InputError("--price", name, f"must be $ per GPU-hour > 0; got {value!r}")
        problem = plausible_check("gpu_hour_usd", price)  # sim/specs/plausible.yaml, as a profile's price
        if problem is not None:
            raise InputError("--price", name, problem)
        if name in prices:
            raise InputError("--price", name, "given twice")
        prices[name] = price
    return prices


def build_candidates(base: EngineConfig, hardware: list[str], tps: list[int], policies: list[str],
                     knob_settings: list[dict] | None = None, prices: dict[str, float] | None = None,
                     layouts: LayoutGrid | None = None,
                     billing: dict[str, str] | None = None) -> tuple[list[Candidate], list[Skipped]]:
    """Every runnable (hardware, tp, layout, policy, knob setting) on top of `base`, and the skipped
    ones with why. Unknown hardware, model or policy names, or a knob value the config rejects, raise
    InputError (a typo, not a skip). `prices`: $ per GPU-hour overriding the profiles' (parse_prices).
    `layouts`: also each TP's layouts of the grid (None: plain TP within one scale-up domain).
    `billing`: billing unit by profile overriding the profiles' (sim.planner.billing.parse_billing)."""
    settings = knob_settings or [{}]
    if base.prefill_replicas is not None or base.decode_replicas is not None:
        raise InputError("--config", "prefill_replicas/decode_replicas", "plan sizes aggregated replicas (its GPU "
                         "count and cost would miss the P:D groups); drop them and compare P:D layouts with "
                         "`plan --disagg 1:1,1:2` (or `infersim disagg`)")
    for policy in policies:
        if policy not in POLICIES:
            raise InputError("--policy", policy, f"unknown policy; allowed: {', '.join(POLICIES)}")
    model = load_model(base.model)
    profiles = [load_hardware(name) for name in hardware]
    runnable, skipped = [], []
    for name, hw in zip(hardware, profiles, strict=True):
        for tp in tps:
            for variant in ([{}] if layouts is None else layouts.variants(tp)):
                for policy in policies:
                    for knobs in settings:
                        knobs = {**variant, **knobs}
                        own = {**knobs, "hardware": name, "tp": tp, "policy": policy, "replicas": 1}
                        cfg = validate(EngineConfig, fit_inherited_to_policy({**base.model_dump(), **own}, own),
                                       "--search")
                        price = (prices or {}).get(name, hw.cost_per_hour_usd)
                        reason = (_why_not(model, hw, tp, cfg, price) if layouts is None else
                                  _why_not_layout(model, hw, cfg, price))
                        if reason is not None:
                            skipped.append(Skipped(name, tp, policy, reason,
                                                   None if layouts is None else layout_label(cfg)))
                        else:
                            runnable.append(Candidate(cfg, price, tuple(knobs.items()),
                                                      hw.interconnect.max_gpus_per_node,
                                                      billing_of(hw, (billing or {}).get(name))))
    return runnable, skipped


_RADIX_ONLY_KNOBS = ("policy", "radix_ordering", "radix_chunked", "cpu_cache_gib")


def drop_radix_twins(candidates: list[Candidate], has_prefix_ids: bool,
                     keep: str = "chunked") -> tuple[list[Candidate], list[Skipped]]:
    """Without prefix ids in the workload nothing is ever shared, so a `radix` candidate (FCFS order,
    on top of chunked prefill) replays exactly as the `chunked` candidate with the same other knobs:
    searching and verifying both would only double the work. One of each pair is kept, `keep`
    ("chunked", or "radix": the engine's default, prefix caching on, so its launch line does not
    switch off what the simulation could not judge); the other is skipped with why."""
    if has_prefix_ids:
        return candidates, []

    def key(cfg: EngineConfig) -> tuple:
        return tuple(sorted((k, repr(v)) for k, v in cfg.model_dump().items() if k not in _RADIX_ONLY_KNOBS))

    def is_twin_radix(cfg: EngineConfig) -> bool:
        return cfg.policy == "radix" and cfg.radix_chunked and cfg.radix_ordering == "fcfs"

    chunked = {key(c.cfg) for c in candidates if c.cfg.policy == "chunked"}
    radix = {key(c.cfg) for c in candidates if is_twin_radix(c.cfg)}
    kept, skipped = [], []
    for c in candidates:
        cfg = c.cfg
        if keep == "radix" and cfg.policy == "chunked" and key(cfg) in radix:
            skipped.append(Skipped(cfg.hardware, cfg.tp, "chunked", "the workload has no prefix ids, so chunked "
                                   "replays exactly as radix with the same knobs (not searched twice; radix is the "
                                   "engine's default)", layout_label(cfg)))
        elif keep != "radix" and is_twin_radix(cfg) and key(cfg) in chunked:
            skipped.append(Skipped(cfg.hardware, cfg.tp, "radix", "the workload has no prefix ids, so radix "
                                   "replays exactly as chunked with the same knobs (not searched twice)"))
        else:
            kept.append(c)
    return kept, skipped


SPAN_NODES_HINT = "span nodes with pipeline stages (plan --pp 1,2; docs/parallelism.md)"


def _why_not(model, hw, tp: int, base: EngineConfig, price: float | None) -> str | None:
    """Why a (hardware, tp) candidate cannot run, with what to change; None when it can. Past a
    node's GPUs the advice is pipeline stages, never a larger --tp (TP stays inside a node)."""
    if price is None:
        return f"profile {hw.name} has no cost_per_hour_usd (give --price {hw.name}=USD)"
    if tp > hw.scale_up_gpus:  # a TP group may span the nodes of one NVLink domain (GB200 NVL72 trays)
        return (f"tp {tp} exceeds the {hw.scale_up_gpus} GPUs of {_domain_words(hw, 'one')} (tensor parallelism "
                f"stays in one NVLink domain: {SPAN_NODES_HINT})")
    try:
        plan_memory(model, hw, tp, base.block_size, base.gpu_memory_utilization, base.weight_dtype,
                    base.kv_dtype, base.max_num_batched_tokens, base.max_num_seqs,
                    **kv_pool_args(base.engine))
    except InputError as exc:
        return _node_hint(f"tp {tp} {exc.allowed}" if exc.where == "--tp" else exc.allowed, tp, hw)
    return None


def _domain_words(hw, article: str) -> str:
    """The scale-up domain a TP group may span, in words: a node (HGX) or an NVLink domain of nodes."""
    if hw.scale_up_gpus == hw.interconnect.max_gpus_per_node:
        return f"{article} node"
    return f"{article} NVLink domain ({hw.scale_up_gpus // hw.interconnect.max_gpus_per_node} nodes)"


def _node_hint(reason: str, tp: int, hw) -> str:
    """`reason` with sim.inputs.layout.memory's 'raise --tp' advice replaced by pipeline stages when tp
    fills the NVLink (scale-up) domain a TP group may span."""
    if tp < hw.scale_up_gpus:
        return reason
    return reason.replace(RAISE_TP_HINT, f" (tp {tp} fills {_domain_words(hw, 'a')}: {SPAN_NODES_HINT}, or raise "
                                         "--gpu-memory-utilization, or use a smaller dtype)")


def _why_not_layout(model, hw, cfg: EngineConfig, price: float | None) -> str | None:
    """Why the simulator would refuse this laid-out replica (its own layout and memory rules), or None."""
    if price is None:
        return f"profile {hw.name} has no cost_per_hour_usd (give --price {hw.name}=USD)"
    try:
        layout = simulated_layout(cfg, model)
        plan_layout_memory(model, hw, layout, cfg.block_size, cfg.gpu_memory_utilization, cfg.weight_dtype,
                           cfg.kv_dtype, cfg.max_num_batched_tokens, cfg.max_num_seqs,
                           **kv_pool_args(cfg.engine))
    except InputError as exc:
        return _node_hint(exc.line(), cfg.tp, hw)
    return None
