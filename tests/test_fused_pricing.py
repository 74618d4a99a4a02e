"""The fused core's pre-bound decode price (sim/engine/fused/pricing.py) is the cost model's step time
of a decode step, bit for bit: the plain roofline and engine presets' wrappers (graph padding, eager
launches, engine CPU time), on random batches."""

from __future__ import annotations

import numpy as np
import pytest

from sim.engine.fused.pricing import bind_decode_price
from sim.inputs.config import EngineConfig
from sim.inputs.model import load_model
from sim.run.simulate import _replica_parts


@pytest.mark.parametrize("knobs", [{}, {"model": "llama-2-70b", "tp": 4}, {"engine": "vllm@0.6"},
                                   {"engine": "vllm@0.15", "policy": "continuous"},
                                   {"engine": "sglang@0.5", "policy": "continuous"}],
                         ids=["roofline", "70b-tp4", "vllm@0.6", "vllm@0.15", "sglang@0.5"])
def test_decode_price_equals_step_time(knobs):
    cfg = EngineConfig(**knobs)
    _, cost = _replica_parts(cfg, load_model(cfg.model), cfg.hardware, None)
    price = bind_decode_price(cost, cfg.block_size)
    assert price is not None
    rng = np.random.default_rng(3)
    for n in [1, 2, 7, 16, 33, 100, 256, 513]:
        contexts = rng.integers(1, 8000, n)
        blocks = int(np.sum(-(-(contexts + 1) // cfg.block_size)))
        expected = cost.step_time_s(np.ones(n, dtype=np.int64), contexts, n)
        assert price(n, int(contexts.sum()), blocks) == expected, n
