"""A cluster's replicas simulated in parallel processes, when nothing couples them.

With a router that places every arrival up front (round_robin, random: `Router.assign_all`), the
replicas of an open-loop, aggregated cluster share nothing while they run: each gets its arrivals
from a process of its own (`sim.engine.replica.ArrivalSource`, so its clock never depends on the others'),
keeps its own recorder and writes only its own rows of the request table. So each replica can run
alone on its share of the trace (`simulate(..., only_replica=r)`), in any process, and the shares
merge into the very result the whole run gives, bit for bit (tests/test_replica_split.py):
`--workers` changes speed, not output.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from sim.engine.metrics import Recorder
from sim.engine.request import RUN_STATE_COLUMNS, RequestTable
from sim.engine.routers.registry import make_router
from sim.errors import InputError
from sim.inputs.config import EngineConfig
from sim.inputs.layout.memory import MemoryPlan
from sim.inputs.workload.trace import ClosedLoop, Trace
from sim.run.attribution import Attribution
from sim.run.simulate import ReplicaFacts, SimResult, simulate

SPLITTABLE_ROUTERS = ("round_robin", "random")
ONE_REPLICA = "there is one replica"


def why_not_split(cfg: EngineConfig, workload: Trace | ClosedLoop) -> str | None:
    """Why this run's replicas cannot run apart (None: they can)."""
    if cfg.is_disaggregated:
        return "disaggregated prefill and decode replicas hand KV to each other"
    if cfg.replicas == 1:
        return ONE_REPLICA
    if cfg.dp > 1:
        return "data-parallel-attention ranks are schedulers of their own (sim.run.simulate._schedulers_of)"
    if cfg.enable_lora:
        return "LoRA adapter slots' counters are read from the live replicas (docs/lora.md)"
    if isinstance(workload, ClosedLoop):
        return "closed-loop clients send each request to whichever replica the router picks then"
    if cfg.router not in SPLITTABLE_ROUTERS:
        return (f"router {cfg.router} reads the replicas' state at each arrival; replicas run apart only with "
                f"{' or '.join(SPLITTABLE_ROUTERS)}")
    return None


def simulate_cluster(cfg: EngineConfig, workload: Trace | ClosedLoop, backend=None,
                     progress: Callable[[int, int], None] | None = None, request_gaps: bool = False) -> SimResult:
    """`simulate(cfg, workload, progress, request_gaps=...)`, with the replicas spread over the processes
    of `backend` (a `sim.run.backends.LocalBackend`; None or one worker: here). More than one worker needs
    a run whose replicas can run apart (`why_not_split`); a single replica just runs here."""
    reason = why_not_split(cfg, workload)
    if backend is None or backend.workers == 1 or reason == ONE_REPLICA:
        return simulate(cfg, workload, progress, request_gaps=request_gaps)
    if reason is not None:
        raise InputError("--workers", None, f"must be 1 for this run: {reason}")
    return simulate_split(cfg, workload, backend.run_tasks, progress, request_gaps)


def replica_shares(cfg: EngineConfig, trace: Trace) -> list[np.ndarray]:
    """Each replica's request rows, in arrival order: the picks the whole run's router makes."""
    router = make_router(cfg.router, np.random.default_rng(cfg.seed))  # as sim.run.simulate builds it
    replica_of = router.assign_all(len(trace), cfg.replicas)
    return [np.flatnonzero(replica_of == replica) for replica in range(cfg.replicas)]


def simulate_split(cfg: EngineConfig, trace: Trace, run_tasks: Callable,
                   progress: Callable[[int, int], None] | None = None, request_gaps: bool = False) -> SimResult:
    """Run each replica on its share through `run_tasks(fn, arg_tuples)` (which yields (index,
    result) as tasks end, e.g. `LocalBackend.run_tasks`) and merge the shares as they come."""
    wall_time_start_s = time.perf_counter()  # reported only
    shares = replica_shares(cfg, trace)
    merge = ShareMerge(cfg, trace, shares)
    n_done = 0
    for replica, outcome in run_tasks(simulate_share, _ShareTasks(cfg, trace, shares, request_gaps)):
        merge.add(replica, outcome)
        n_done += len(shares[replica])
        if progress is not None:
            progress(n_done, len(trace))
    return merge.result(time.perf_counter() - wall_time_start_s)


class _ShareTasks(Sequence):
    """The (cfg, share, replica) argument tuples, each share cut from the trace only when handed out.
    Prefix ids go along only to a policy that reads them (radix)."""

    def __init__(self, cfg: EngineConfig, trace: Trace, shares: list[np.ndarray], request_gaps: bool = False):
        self.cfg, self.trace, self.shares, self.request_gaps = cfg, trace, shares, request_gaps

    def __len__(self) -> int:
        return len(self.shares)

    def __getitem__(self, replica: int) -> tuple[EngineConfig, Trace, int, bool]:
        share = self.trace.take(self.shares[replica], hash_ids=self.cfg.policy == "radix")
        return self.cfg, share, replica, self.request_gaps


@dataclass
class ShareOutcome:
    """One replica's run on its share, in picklable pieces."""

    columns: dict[str, np.ndarray]  # RUN_STATE_COLUMNS of its table (its requests, then their samples)
    reject_reason: dict[int, str]  # by row of its table
    attribution: dict[str, np.ndarray] | None  # Attribution arrays over its requests
    recorder: Recorder  # without its attribution
    facts: ReplicaFacts
    memory: MemoryPlan
    n_blocks: int
    max_model_len: int
    sim_duration_s: float


def simulate_share(cfg: EngineConfig, share: Trace, replica: int, request_gaps: bool = False) -> ShareOutcome:
    """Replica `replica` of cfg's cluster, alone on `share` (runs in a worker process)."""
    result = simulate(cfg, share, only_replica=replica, request_gaps=request_gaps)
    table, recorder = result.table, result.recorder
    attribution = None if recorder.attribution is None else _arrays_of(recorder.attribution)
    recorder.attribution = None
    recorder.compact_as_part()  # as the merge would: less to send and to hold
    return ShareOutcome({name: getattr(table, name) for name in RUN_STATE_COLUMNS}, table.reject_reason,
                        attribution, recorder, result.facts[0], result.memory, result.num_gpu_blocks,
                        result.max_model_len, result.sim_duration_s)


class ShareMerge:
    """The whole run's result, built from its replicas' outcomes as they arrive (in any order): rows
    go to the table and attribution at once; recorders and totals are added up in replica order at
    the end, as `simulate` adds them up."""

    def __init__(self, cfg: EngineConfig, trace: Trace, shares: list[np.ndarray]):
        self.cfg, self.trace, self.shares = cfg, trace, shares
        self.table: RequestTable | None = None  # made at the first outcome (it knows max_model_len)
        self.attribution: Attribution | None = None
        self.rejected: dict[int, str] = {}
        self.outcomes: list[ShareOutcome | None] = [None] * len(shares)

    def add(self, replica: int, outcome: ShareOutcome) -> None:
        if self.table is None:
            self.table = RequestTable(self.trace, outcome.max_model_len)
            self.attribution = Attribution(self.table) if self.cfg.latency_attribution else None
        rows = self.shares[replica]
        table_rows = _table_rows(self.table, rows)
        if outcome.recorder.request_gaps is not None:  # its rows are its share table's: the whole run's
            outcome.recorder.request_gaps.remapped(table_rows)
        for name in RUN_STATE_COLUMNS:
            getattr(self.table, name)[table_rows] = outcome.columns[name]
        self.rejected.update({int(table_rows[row]): reason for row, reason in outcome.reject_reason.items()})
        if self.attribution is not None:
            for name, values in outcome.attribution.items():
                getattr(self.attribution, name)[..., rows] = values
        outcome.columns, outcome.attribution = {}, None  # merged: let them go
        self.outcomes[replica] = outcome

    def result(self, wall_time_s: float) -> SimResult:
        outcomes, table = self.outcomes, self.table
        # a whole run records rejections as they happen: in time order
        table.reject_reason = dict(sorted(self.rejected.items(), key=lambda item: (table.finish_s[item[0]], item[0])))
        recorder = Recorder.merged([outcome.recorder for outcome in outcomes])
        recorder.attribution = self.attribution
        return SimResult(self.cfg, table, recorder, outcomes[0].memory, [outcome.n_blocks for outcome in outcomes],
                         outcomes[0].max_model_len, max(outcome.sim_duration_s for outcome in outcomes), wall_time_s,
                         replicas=[], facts=[outcome.facts for outcome in outcomes])


def _table_rows(table: RequestTable, requests: np.ndarray) -> np.ndarray:
    """Rows of the whole table for the rows of a share's table (its requests `requests`, then
    their parallel-sample rows, request by request, as `RequestTable` lays them out)."""
    samples = [table.children[rid] for rid in requests.tolist() if rid in table.children]
    return np.concatenate([requests, *map(np.asarray, samples)]).astype(np.int64) if samples else requests


def _arrays_of(attribution: Attribution) -> dict[str, np.ndarray]:
    """The per-request arrays of an Attribution (requests on the last axis)."""
    n = attribution.fresh.shape[0]
    return {name: value for name, value in vars(attribution).items()
            if isinstance(value, np.ndarray) and value.shape[-1:] == (n,)}
