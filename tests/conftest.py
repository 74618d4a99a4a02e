"""Shared fixtures of the engine tests: a tiny Trace builder and a constant-step-time cost double."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from sim.inputs.workload.trace import Trace

# A power of two, so sums of whole and half steps are exact in float64 and golden times compare with ==.
STEP_S = 2.0**-6  # 15.625 ms


class ConstantCost:
    """Every step costs `step_s`, whatever the batch; a decode run of k steps costs k * step_s.

    Swap transfers cost `swap_s_per_block` per block moved (the base scheduler derives it from
    block_size * kv_bytes_per_token_layer_gpu * n_layers / host_link_bytes_s; we set the first two
    factors so that the link speed gives exactly the wanted per-block time).
    """

    def __init__(self, step_s: float = STEP_S, swap_s_per_block: float = 0.0, block_size: int = 16):
        self.step_s = step_s
        self.kv_bytes_per_token_layer_gpu = 1.0
        self.model = SimpleNamespace(n_layers=1)
        link_bytes_s = block_size / swap_s_per_block if swap_s_per_block > 0 else math.inf
        self.hw = SimpleNamespace(host_link_bytes_s=link_bytes_s)
        self.n_step_calls = 0
        self.n_run_calls = 0

    def step_time_s(self, new_tokens: np.ndarray, cached_tokens: np.ndarray, n_sampled: int,
                    verify_tokens: int = 1) -> float:
        self.n_step_calls += 1
        return self.step_s

    def decode_run_times_s(self, contexts: np.ndarray, n_steps: int) -> np.ndarray:
        self.n_run_calls += 1
        return np.full(n_steps, self.step_s)

    def decode_run(self, contexts: np.ndarray, n_steps: int) -> tuple[np.ndarray, None]:
        """Times of a decode run; no block accounting (the scheduler works it out)."""
        return self.decode_run_times_s(contexts, n_steps), None


def make_trace(rows, hash_ids=None, hash_block_tokens: int | None = None) -> Trace:
    """A Trace from (arrival_s, prompt_tokens, output_tokens) rows, optionally with per-request
    hash id lists (one list per row)."""
    arrival, prompt, output = (np.array(col) for col in zip(*rows))
    flat = offsets = None
    if hash_ids is not None:
        lengths = [len(ids) for ids in hash_ids]
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        flat = np.array([h for ids in hash_ids for h in ids], dtype=np.int64)
    return Trace(arrival_s=arrival.astype(float), prompt_tokens=prompt, output_tokens=output,
                 hash_ids_flat=flat, hash_offsets=offsets, hash_block_tokens=hash_block_tokens, source="test")


@pytest.fixture
def constant_cost() -> ConstantCost:
    return ConstantCost()


def smooth_only(hw):
    """A profile without its measured tables (`calibration`): what tests of the smooth model's formulas
    price with, now that bundled profiles carry imported GEMM grids (sim/cost/gemm_grid.py)."""
    return hw.model_copy(update={"calibration": None})
