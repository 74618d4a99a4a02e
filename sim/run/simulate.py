"""One simulation: build the replica(s) from a config, replay a workload, return the raw result."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import simpy

from sim.cost import CostModel
from sim.cost.expert_parallel import expert_parallelism_of
from sim.cost.replica import replica_cost_model
from sim.engine.energy import attach_energy
from sim.engine.frontend import Tokenizer, shift_by_tokenize, shift_to_client
from sim.engine.kv.blocks import BlockManager
from sim.engine.lockstep import LockstepRank, group_ranks
from sim.engine.metrics import Recorder, replica_gap_compact_at
from sim.engine.replica import ArrivalSource, ClosedLoopSource, Replica
from sim.engine.request import RequestTable, Status
from sim.engine.request_gaps import RequestGaps
from sim.engine.routers.registry import make_router
from sim.engine.sched.registry import make_scheduler
from sim.engine.spec_decode import draft_model_of, make_spec_decoder
from sim.errors import InputError
from sim.inputs.config import EngineConfig
from sim.inputs.engines import EngineCost, EngineOverhead, load_engine
from sim.inputs.engines.preset import kv_pool_args
from sim.inputs.hardware import GIB, load_hardware
from sim.inputs.layout.checks import simulated_layout
from sim.inputs.layout.layout_memory import plan_layout_memory
from sim.inputs.layout.memory import MemoryPlan, blocks_beside_adapters
from sim.inputs.model import load_model
from sim.inputs.workload.trace import ClosedLoop, Trace
from sim.run.attribution import Attribution
from sim.run.fused import fused_refusals, replay_fused


@dataclass(frozen=True)
class ReplicaFacts:
    """What the summary reads of each replica once the run is over (picklable, unlike a Replica)."""

    hardware: str
    evicted_blocks: int = 0  # radix: prefix-cache blocks evicted
    spec_k: int = 0  # speculative decoding: proposals per step (0: off)
    spec_acceptance: tuple[float, ...] = ()
    spec_proposed: int = 0
    spec_accepted: int = 0

    @classmethod
    def of(cls, replica: Replica) -> ReplicaFacts:
        sched = replica.sched
        radix, spec = getattr(sched, "radix", None), getattr(sched, "spec", None)
        facts = {"hardware": sched.cfg.hardware, "evicted_blocks": radix.n_evicted_blocks if radix is not None else 0}
        if spec is not None:
            facts.update(spec_k=spec.k, spec_acceptance=tuple(float(a) for a in spec.acceptance),
                         spec_proposed=spec.n_proposed, spec_accepted=spec.n_accepted)
        return cls(**facts)


@dataclass
class SimResult:
    cfg: EngineConfig
    table: RequestTable
    recorder: Recorder
    memory: MemoryPlan  # of the first replica's hardware
    num_gpu_blocks_per_replica: list[int]
    max_model_len: int
    sim_duration_s: float
    wall_time_s: float
    replicas: list[Replica]  # the live replicas; none for a run split across processes (sim.run.replica_split)
    disagg: object | None = None  # sim.engine.disagg.build.DisaggCluster of a disaggregated run
    stopped_early_s: float | None = None  # when a stop_watch ended the run (requests still in flight)
    # per replica, in order; from `replicas` unless given (a run split across processes has no Replica objects)
    facts: list[ReplicaFacts] | None = None

    def __post_init__(self) -> None:
        if self.facts is None:
            self.facts = [ReplicaFacts.of(replica) for replica in self.replicas]

    @property
    def num_gpu_blocks(self) -> int:
        return self.num_gpu_blocks_per_replica[0]

    @property
    def evicted_blocks(self) -> int:
        return sum(facts.evicted_blocks for facts in self.facts)


def simulate(cfg: EngineConfig, workload: Trace | ClosedLoop,
             progress: Callable[[int, int], None] | None = None, cost: CostModel | None = None,
             time_scale: dict[str, float] | None = None, overhead: EngineOverhead | None = None,
             stop_watch=None, only_replica: int | None = None, request_gaps: bool = False,
             core: str = "auto") -> SimResult:
    """Replay `workload` through `cfg.replicas` replicas. Deterministic for a given cfg.seed.

    `cost` replaces the roofline cost model (tests use a constant step time); it must offer
    `step_time_s`, `decode_run_times_s`, `decode_run` (times, block tokens or None),
    `kv_bytes_per_token_layer_gpu`, `model.n_layers` and `hw.host_link_bytes_s`.
    `time_scale` multiplies the roofline cost model's times per op class (prediction intervals).
    With `cfg.engine`, `overhead` replaces the preset's engine terms (engine calibration).
    `stop_watch` (e.g. sim.planner.early_stop.FailureWatch): `bind(table)`, then `finished(row)` as each
    request ends (on any replica, prefill or decode); the run stops when it returns True
    (`stopped_early_s`). Open-loop runs without parallel samples only; ignored otherwise.
    `only_replica`: build just that replica of the aggregated cluster (its index, hardware and seeds)
    and replay `workload` on it alone: `workload` is its share (sim.run.replica_split).
    `request_gaps`: the recorder also keeps each request's own inter-token gaps
    (sim.engine.request_gaps: bench_serve.json's `itls`).
    `core`: "auto" runs the fused core (sim/engine/fused: same results) where `sim.run.fused.fused_refusals`
    finds nothing, the engine elsewhere; "engine" always the engine; "fused" the fused core or ValueError."""
    wall_time_start_s = time.perf_counter()  # wall_time_s is reported only, never used by the logic
    model = load_model(cfg.model)
    if core != "engine":
        refused = fused_refusals(cfg, len(_schedulers_of(cfg, model)), workload, overhead, stop_watch, only_replica,
                                 request_gaps)
        if core == "fused" and refused:
            raise ValueError(f"the fused core does not cover {', '.join(refused)}")
        if not refused:
            return _simulate_fused(cfg, model, workload, cost, time_scale, overhead, progress, wall_time_start_s)
    max_model_len = cfg.max_model_len or model.max_position_embeddings
    trace = workload.pool if isinstance(workload, ClosedLoop) else workload
    table = RequestTable(trace, max_model_len)
    recorder = Recorder(cfg.record_steps, None if cfg.is_disaggregated else replica_gap_compact_at(cfg.replicas))
    recorder.attribution = Attribution(table) if cfg.latency_attribution else None
    recorder.request_gaps = RequestGaps() if request_gaps else None
    env = simpy.Environment()
    router = make_router(cfg.router, np.random.default_rng(cfg.seed))
    frontend_s = _frontend_s(cfg, overhead)
    tokenize_s = _tokenize_s_per_token(cfg, overhead)
    tokenizer = Tokenizer(table, tokenize_s) if tokenize_s > 0 and not isinstance(workload, ClosedLoop) else None
    if isinstance(workload, ClosedLoop):
        source = ClosedLoopSource(env, workload, table, router, progress, client_delay_s=frontend_s)
    else:
        source = ArrivalSource(env, table.arrival_s[: table.n_requests], router, progress)
    parts = functools.partial(_replica_parts, time_scale=time_scale, overhead=overhead)
    disagg = None
    if cfg.is_disaggregated:  # hook: disaggregated prefill/decode (sim/engine/disagg/)
        from sim.engine.disagg.build import build_disaggregated

        disagg = build_disaggregated(cfg, model, env, table, recorder, source, max_model_len, cost, parts)
        replicas, blocks_per_replica, memory = disagg.replicas, disagg.blocks_per_replica, disagg.first_memory
        source.start(disagg.prefill)
        for replica in disagg.decode:
            replica.sched.finished_listener = disagg.prefill[0].sched.finished_listener
    else:
        replicas, memory, blocks_per_replica = _build_replicas(cfg, model, env, table, recorder, source,
                                                                max_model_len, cost, parts, only_replica)
        source.start(replicas)
    stopped = _watch(env, replicas, table, stop_watch) if stop_watch is not None and _watchable(workload, table) \
        else None
    env.run()
    if stopped is None or not stopped.triggered:
        _check_every_request_ended(table)
    if tokenizer is not None:
        tokenizer.restore(recorder.attribution)
    elif isinstance(workload, ClosedLoop):
        shift_by_tokenize(table, tokenize_s, recorder.attribution)
    shift_to_client(table, frontend_s, recorder.attribution)
    if disagg is None:  # each aggregated replica kept its own recorder (merged in replica order)
        recorder = Recorder.merged([replica.sched.recorder for replica in replicas])
    wall_time_s = time.perf_counter() - wall_time_start_s
    return SimResult(cfg, table, recorder, memory, blocks_per_replica, max_model_len, float(env.now), wall_time_s,
                     replicas, disagg, float(env.now) if stopped is not None and stopped.triggered else None)


def _simulate_fused(cfg: EngineConfig, model, trace: Trace, cost, time_scale, overhead, progress,
                    wall_time_start_s: float) -> SimResult:
    """`simulate` through the fused core (one replica, which `fused_refusals` checked)."""
    memory, replica_cost = _replica_parts(cfg, model, cfg.hardware, cost, time_scale, overhead)
    max_model_len = cfg.max_model_len or model.max_position_embeddings
    table, record, n_blocks, end_s = replay_fused(cfg, trace, memory, replica_cost, max_model_len, progress)
    shift_to_client(table, _frontend_s(cfg, overhead), record.attribution)
    return SimResult(cfg, table, record, memory, [n_blocks], max_model_len, end_s,
                     time.perf_counter() - wall_time_start_s, [], facts=[ReplicaFacts(hardware=cfg.hardware)])


def _frontend_s(cfg: EngineConfig, overhead: EngineOverhead | None) -> float:
    """The API server's per-request path (sim.engine.frontend): the given engine terms', else the preset's."""
    if overhead is not None:
        return overhead.frontend_s
    return 0.0 if cfg.engine is None else load_engine(cfg.engine).overhead.frontend_ms * 1e-3


def _adp_balance(cfg: EngineConfig):
    """The preset's attention-DP balancing when it is on (TensorRT-LLM `attention_dp_config`), else None."""
    balance = None if cfg.engine is None else load_engine(cfg.engine).attention_dp_balance
    if balance is None or not balance.enable_balance:
        return None
    if cfg.policy not in ("chunked", "radix"):
        raise InputError("--policy", None, f"{cfg.policy}: the preset's attention-DP balancing holds context work "
                                           "in the chunked schedulers only; allowed: chunked, radix")
    return balance


def _tokenize_s_per_token(cfg: EngineConfig, overhead: EngineOverhead | None) -> float:
    """The engine's tokenizer cost per prompt token (sim.engine.frontend): the given terms', else the preset's."""
    if overhead is not None:
        return overhead.tokenize_s_per_token
    return 0.0 if cfg.engine is None else load_engine(cfg.engine).overhead.tokenize_us_per_token * 1e-6


def _check_every_request_ended(table: RequestTable) -> None:
    """No event is left, so every request must have finished or been rejected; one still queued,
    running or swapped out means a scheduler stalled (a bug, not bad input): fail loudly rather
    than report part of the run as the whole."""
    stuck = np.isin(table.status, (Status.WAITING, Status.RUNNING, Status.SWAPPED))
    if stuck.any():
        raise RuntimeError(f"the simulation stalled with {int(stuck.sum())} of {table.status.shape[0]} requests "
                           f"still queued or running (first: row {int(stuck.nonzero()[0][0])}); please report it")


def _watchable(workload, table: RequestTable) -> bool:
    return not isinstance(workload, ClosedLoop) and table.sample_of.shape[0] == table.n_requests


def _watch(env: simpy.Environment, replicas: list[Replica], table: RequestTable, watch) -> simpy.Event:
    """Call `watch.finished(row)` as each request ends; stop the run (at that instant) once it says so."""
    watch.bind(table)
    stop = env.event()
    stop.callbacks.append(simpy.core.StopSimulation.callback)

    def on_finished(row: int) -> None:
        if not stop.triggered and watch.finished(row):
            stop.succeed()

    for replica in replicas:
        replica.sched.finished_listener = on_finished
    return stop


def _build_replicas(cfg: EngineConfig, model, env, table, recorder, source, max_model_len: int,
                    cost: CostModel | None, parts: Callable,
                    only_replica: int | None = None) -> tuple[list[Replica], MemoryPlan, list[int]]:
    """The replicas of an aggregated cluster (one per profile in cfg.hardware_of_replicas(), or just
    `only_replica`), each with its own recorder; `parts(cfg, model, hw_name, cost)` gives a profile's
    memory plan and cost model."""
    replicas, memories, blocks_per_replica = [], {}, []
    chosen = _schedulers_of(cfg, model)
    n_ranks = len(chosen) // len(cfg.hardware_of_replicas())
    if only_replica is not None:
        n_ranks = 1  # one replica alone (sim.run.replica_split, which refuses data-parallel attention)
    replica_kind = Replica if n_ranks == 1 else LockstepRank  # data-parallel attention: ranks in lockstep
    for index, hw_name in chosen if only_replica is None else [chosen[only_replica]]:
        if hw_name not in memories:
            memories[hw_name] = parts(cfg, model, hw_name, cost)
        memory, replica_cost = memories[hw_name]
        n_blocks = cfg.num_gpu_blocks_override or blocks_beside_adapters(cfg, model, memory)
        cpu_blocks = int(cfg.swap_space * GIB // (cfg.block_size * memory.kv_bytes_per_token_per_gpu))
        blocks = BlockManager(n_blocks, cfg.block_size, int(cfg.watermark * n_blocks), cpu_blocks)
        sched = make_scheduler(cfg, table, blocks, replica_cost, recorder.sibling() if replicas else recorder, index,
                               max_model_len)
        sched.spec = make_spec_decoder(cfg, replica_cost, index)
        sched.recorder.energy_missing = attach_energy(sched, replica_cost, load_hardware(hw_name))
        engine = getattr(replica_cost, "engine", None)
        replicas.append(replica_kind(env, sched, source, async_scheduling=bool(engine and engine.async_scheduling)))
        blocks_per_replica.append(n_blocks)
    if n_ranks > 1:
        group_ranks(env, replicas, n_ranks, source, _adp_balance(cfg))
    return replicas, next(iter(memories.values()))[0], blocks_per_replica


def _schedulers_of(cfg: EngineConfig, model) -> list[tuple[int, str]]:
    """(index, profile) of each scheduler of an aggregated cluster: one per replica, or with
    data-parallel attention one per attention rank (replica r's ranks are r*d .. r*d + d-1), each
    with its own requests, KV blocks and batch, the d ranks of a replica stepping together
    (sim/engine/lockstep.py prices each step's MoE layers on the tokens the d ranks hold); the router
    deals requests over all of them."""
    ranks = cfg.layout().n_kv_ranks if model.moe is not None else 1
    per_replica = cfg.hardware_of_replicas()
    return list(enumerate(hw for hw in per_replica for _ in range(ranks)))


def _replica_parts(cfg: EngineConfig, model, hw_name: str, cost: CostModel | None,
                   time_scale: dict[str, float] | None = None,
                   overhead: EngineOverhead | None = None) -> tuple[MemoryPlan, CostModel]:
    """Memory plan and cost model of one replica on `hw_name` (shared by replicas of that kind).
    With an engine preset the GPU cost model carries no step constant and `EngineCost` adds the
    engine's own CPU time and CUDA-graph padding around it. `time_scale` scales op classes."""
    hw = load_hardware(hw_name)
    layout = simulated_layout(cfg, model)  # hook: TP x PP (sim/inputs/layout/parallel.py)
    mtp = bool(cfg.spec_tokens) and cfg.spec_method == "mtp"
    memory = plan_layout_memory(model, hw, layout, cfg.block_size, cfg.gpu_memory_utilization, cfg.weight_dtype,
                                cfg.kv_dtype, cfg.max_num_batched_tokens, cfg.max_num_seqs, draft_model_of(cfg),
                                mtp=mtp, **kv_pool_args(cfg.engine))
    preset = None if cfg.engine is None else load_engine(cfg.engine)
    if cost is None:
        cost = replica_cost_model(model, hw, cfg.tp, cfg.weight_dtype, cfg.kv_dtype, cfg.block_size, pp=layout.pp,
                                  layout=layout, expert_parallel=expert_parallelism_of(cfg, model, layout),
                                  step_overhead_s=None if preset is None else 0.0,
                                  allreduce_kind=cfg.allreduce_kind or (preset.allreduce_kind if preset else "nccl"),
                                  allreduce_rule=preset.custom_allreduce if preset else None,
                                  time_scale=time_scale)
    if preset is None:
        return memory, cost
    if overhead is None:
        overhead = EngineOverhead.for_run(preset, cfg)
    return memory, EngineCost(cost, overhead)

