"""A rough rate to start a candidate's search from, so the bracket needs few doublings.

Only the search's path depends on it, never (for a verdict monotone in rate) its answer.
"""

from __future__ import annotations

import numpy as np

from sim.cost import CostModel
from sim.inputs.config import EngineConfig
from sim.inputs.engines.preset import kv_pool_args
from sim.inputs.hardware import load_hardware
from sim.inputs.layout.memory import plan_memory
from sim.inputs.model import load_model
from sim.inputs.workload.trace import Trace

START_SHARE_OF_SATURATION = 0.5  # SLO-limited rates measured 0.3-0.7 of the estimate (Llama-3-70B, Azure conv)


def saturation_qps(cfg: EngineConfig, trace: Trace) -> float:
    """Requests/s one replica would finish if every request of mean length were prefilled alone and
    decoded in a full batch: batch = min(max_num_seqs, KV tokens / (mean prompt + output)), every
    sequence at the mean mid-decode context. An upper-bound-ish guess, not a prediction. A layout
    beyond plain TP (sim/inputs/layout/parallel.py) uses the replica's own memory plan and cost model (one attention
    rank's view) and counts its attention ranks."""
    if cfg.layout().pp > 1 or not cfg.layout().is_dense_tp_pp:
        return _laid_out_saturation_qps(cfg, trace)
    model, hw = load_model(cfg.model), load_hardware(cfg.hardware)
    memory = plan_memory(model, hw, cfg.tp, cfg.block_size, cfg.gpu_memory_utilization, cfg.weight_dtype,
                         cfg.kv_dtype, cfg.max_num_batched_tokens, cfg.max_num_seqs,
                         **kv_pool_args(cfg.engine))
    cost = CostModel(model, hw, cfg.tp, cfg.weight_dtype, cfg.kv_dtype, cfg.block_size)
    prompt, output = float(trace.prompt_tokens.mean()), float(trace.output_tokens.mean())
    batch = int(max(1, min(cfg.max_num_seqs, memory.max_cached_tokens // (prompt + output))))
    context = int(prompt + output / 2)
    decode_step_s = cost.step_time_s(np.ones(batch, dtype=np.int64), np.full(batch, context, dtype=np.int64), batch)
    prefill_s = cost.step_time_s(np.array([max(1, int(prompt))]), np.zeros(1, dtype=np.int64), 1)
    return 1.0 / (prefill_s + output * decode_step_s / batch)


def start_qps(cfg: EngineConfig, trace: Trace) -> float:
    return START_SHARE_OF_SATURATION * saturation_qps(cfg, trace)


def _laid_out_saturation_qps(cfg: EngineConfig, trace: Trace) -> float:
    from sim.planner.screen import replica_parts

    memory, cost = replica_parts(cfg)
    prompt, output = float(trace.prompt_tokens.mean()), float(trace.output_tokens.mean())
    batch = int(max(1, min(cfg.max_num_seqs, memory.max_cached_tokens // (prompt + output))))
    context = int(prompt + output / 2)
    decode_step_s = cost.step_time_s(np.ones(batch, dtype=np.int64), np.full(batch, context, dtype=np.int64), batch)
    prefill_s = cost.step_time_s(np.array([max(1, int(prompt))]), np.zeros(1, dtype=np.int64), 1)
    return cfg.layout().n_kv_ranks / (prefill_s + output * decode_step_s / batch)
