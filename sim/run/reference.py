"""A run through the reference stepper (sim/engine/reference): the same inputs and the same result type
as `sim.run.simulate.simulate`, so its requests table and summary come from the same code
(`sim.run.summary`). Only what the reference stepper covers is accepted: one replica, the
continuous or chunked-prefill policy, an open-loop trace of single-sample requests, no speculative decoding."""

from __future__ import annotations

from sim.engine.frontend import shift_to_client
from sim.engine.reference.chunked import ChunkedStepper
from sim.engine.reference.continuous import ContinuousStepper
from sim.engine.request import RequestTable
from sim.inputs.config import EngineConfig
from sim.inputs.hardware import GIB
from sim.inputs.model import load_model
from sim.inputs.workload.trace import Trace
from sim.run.attribution_steps import StepAttribution
from sim.run.simulate import ReplicaFacts, SimResult, _frontend_s, _replica_parts, _schedulers_of


def simulate_reference(cfg: EngineConfig, trace: Trace, cost=None) -> SimResult:
    """Replay `trace` (rows in arrival order) through the reference stepper; `cost` replaces the
    roofline cost model as in `simulate` (tests: a constant step time)."""
    model = load_model(cfg.model)
    memory, cost = _replica_parts(cfg, model, cfg.hardware, cost)
    _check_covered(cfg, model, trace)
    max_model_len = cfg.max_model_len or model.max_position_embeddings
    table = RequestTable(trace, max_model_len)
    n_blocks = cfg.num_gpu_blocks_override or memory.num_gpu_blocks
    n_cpu_blocks = int(cfg.swap_space * GIB // (cfg.block_size * memory.kv_bytes_per_token_per_gpu))
    swap_bytes_per_block = cfg.block_size * cost.kv_bytes_per_token_layer_gpu * cost.model.n_layers
    swap_s_per_block = swap_bytes_per_block / cost.hw.host_link_bytes_s
    engine = getattr(cost, "engine", None)  # an engine preset's terms
    stepper_kind = ChunkedStepper if cfg.policy == "chunked" else ContinuousStepper
    stepper = stepper_kind(cfg, table, cost, n_blocks, n_cpu_blocks, swap_s_per_block, max_model_len,
                                async_scheduling=bool(engine is not None and engine.async_scheduling),
                                attribution=StepAttribution(table, cost) if cfg.latency_attribution else None)
    end_s = stepper.run()
    shift_to_client(table, _frontend_s(cfg, None), stepper.record.attribution)
    return SimResult(cfg, table, stepper.record, memory, [n_blocks], max_model_len, end_s, 0.0, [],
                     facts=[ReplicaFacts(hardware=cfg.hardware)])


def _check_covered(cfg: EngineConfig, model, trace) -> None:
    """Refuse (ValueError: the reference stepper is a test and documentation tool) what it does not model."""
    refusals = {
        "a policy other than continuous and chunked": cfg.policy not in ("continuous", "chunked"),
        "more than one replica or attention rank": len(_schedulers_of(cfg, model)) != 1 or cfg.is_disaggregated,
        "a closed loop or parallel samples": not isinstance(trace, Trace) or int(trace.samples().max(initial=1)) > 1,
        "speculative decoding": bool(cfg.spec_tokens),
    }
    named = [what for what, refused in refusals.items() if refused]
    if named:
        raise ValueError(f"the reference stepper does not cover {', '.join(named)}")
