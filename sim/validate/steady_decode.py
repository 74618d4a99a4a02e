"""`steady_decode` validation rows: a decode server measured alone at a fixed batch.

The published setup (SGLang's decode server on 9 x 8 H100, LMSYS blog 2025-05-05): every
attention rank holds `concurrency` sequences of `input_len` prompt tokens, generating `output_len`
tokens each, fed by a prefill side that keeps up (its own nodes). The rate it reports is the
running batch's: ranks x concurrency tokens per decode step. Predicted the same way: one decode
step of `concurrency` sequences at the batch's mean context (input_len + output_len / 2) on one
rank, every rank carrying as many (ranks in lockstep with equal batches step at that time:
sim/engine/lockstep.py), through the engine preset's cost model; output tok/s = ranks x concurrency / step.
The batch must fit one rank's KV cache, else the row cannot be expressed.
"""

from __future__ import annotations

import numpy as np

from sim.errors import InputError
from sim.inputs.model import load_model


def predict_steady_decode(case, cfg):
    """(predicted output tok/s or None, reason) of a `steady_decode` case under `cfg`."""
    from sim.inputs.layout.checks import simulated_layout
    from sim.run.simulate import _replica_parts

    model = load_model(cfg.model)
    try:
        layout = simulated_layout(cfg, model)
        memory, cost = _replica_parts(cfg, model, cfg.hardware, None)
    except InputError as exc:
        return None, exc.line()
    if cfg.spec_tokens:  # one plain decode step is priced here, never a verify step and its draft
        return None, "speculative decoding in a steady_decode row is not modelled (the step priced is a plain decode)"
    batch, longest = int(case.concurrency), int(case.input_len) + int(case.output_len)
    context = int(case.input_len) + int(case.output_len) // 2
    need_blocks = batch * -(-longest // cfg.block_size)
    if need_blocks > memory.num_gpu_blocks:
        return None, (f"{batch} sequences of up to {longest} tokens need {need_blocks:,} KV blocks per rank; "
                      f"a rank holds {memory.num_gpu_blocks:,}")
    step_s = cost.step_time_s(np.ones(batch, dtype=np.int64), np.full(batch, context, dtype=np.int64), batch)
    ranks = layout.n_kv_ranks * cfg.replicas
    return ranks * batch / step_s, ""
