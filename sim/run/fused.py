"""The fused core's part of a run (sim/engine/fused): what it covers, and its replay of one replica.
`sim.run.simulate.simulate` takes this path by itself wherever `fused_refusals` is empty (one
replica, the continuous or chunked-prefill policy, an open-loop trace of single-sample requests, single-step
scheduling, no tokenizer on the request path, no speculative decoding); the engine runs the rest."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from sim.engine.fused.chunked import FusedChunked
from sim.engine.fused.continuous import FusedContinuous, FusedRecord
from sim.engine.fused.pricing import bind_decode_price
from sim.engine.request import RequestTable
from sim.inputs.config import EngineConfig
from sim.inputs.engines import EngineOverhead, load_engine
from sim.inputs.hardware import GIB
from sim.inputs.layout.memory import MemoryPlan
from sim.inputs.workload.trace import Trace
from sim.run.attribution import PARTS, Attribution


def fused_refusals(cfg: EngineConfig, n_schedulers: int, workload, overhead: EngineOverhead | None = None,
                   stop_watch=None, only_replica: int | None = None, request_gaps: bool = False) -> list[str]:
    """What in this run the fused core does not model (empty: it covers the run). `n_schedulers`:
    the run's replicas times attention ranks; the rest as `simulate` takes them (`overhead` replaces
    the engine preset's terms)."""
    if overhead is None and cfg.engine is not None:
        overhead = EngineOverhead.for_run(load_engine(cfg.engine), cfg)
    refusals = {
        "a policy other than continuous and chunked": cfg.policy not in ("continuous", "chunked"),
        "more than one replica or attention rank": n_schedulers != 1 or cfg.is_disaggregated,
        "a closed loop or parallel samples": not isinstance(workload, Trace)
        or int(workload.samples().max(initial=1)) > 1,
        "speculative decoding": bool(cfg.spec_tokens),
        "multi-step scheduling": overhead is not None and overhead.num_scheduler_steps > 1,
        "a tokenizer on the request path": overhead is not None and overhead.tokenize_s_per_token > 0,
        "a stop watch": stop_watch is not None,
        "one replica of a split run": only_replica is not None,
        "per-request gaps": request_gaps,
        "LoRA adapters": cfg.enable_lora,
    }
    return [what for what, refused in refusals.items() if refused]


def replay_fused(cfg: EngineConfig, trace: Trace, memory: MemoryPlan, cost, max_model_len: int,
                 progress: Callable[[int, int], None] | None = None) -> tuple[RequestTable, FusedRecord, int, float]:
    """Replay `trace` (rows in arrival order) on one replica of `memory` priced by `cost`:
    (its requests table, record, KV blocks, when the last event happened)."""
    table = RequestTable(trace, max_model_len)
    n_blocks = cfg.num_gpu_blocks_override or memory.num_gpu_blocks
    n_cpu_blocks = int(cfg.swap_space * GIB // (cfg.block_size * memory.kv_bytes_per_token_per_gpu))
    swap_bytes_per_block = cfg.block_size * cost.kv_bytes_per_token_layer_gpu * cost.model.n_layers
    swap_s_per_block = swap_bytes_per_block / cost.hw.host_link_bytes_s
    core_kind = FusedChunked if cfg.policy == "chunked" else FusedContinuous
    core = core_kind(cfg, table, cost, n_blocks, n_cpu_blocks, swap_s_per_block, max_model_len,
                           bind_decode_price(cost, cfg.block_size), record_steps=cfg.record_steps,
                           async_scheduling=bool(getattr(getattr(cost, "engine", None), "async_scheduling", False)),
                           progress=progress)
    end_s = core.run()
    core.record.attribution = attribution_of(core) if core.attributing else None
    return table, core.record, n_blocks, end_s


def attribution_of(core: FusedContinuous) -> Attribution:
    """The fused core's latency attribution parts as an `Attribution` over its (written back) table, whose
    `columns` make the requests table's `attr_*_s` columns."""
    out = Attribution(core.table)
    n = len(core.mark_s)
    for name, values in core.attr.items():
        out.parts_s[PARTS.index(name), :n] = values
    out.mark_s[:n] = core.mark_s
    out.fresh[:n] = np.isnan(out.mark_s[:n])
    out.high_water[:n] = core.high_water
    return out
