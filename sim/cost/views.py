"""What the cost model's helper files see of the objects they serve, as protocols.

`CostModel` (sim/cost/model.py) builds its hot path (sim/cost/hot.py) and calls the op formulas of
sim/cost/attention_ops.py and sim/cost/layer_ops.py with itself; the hot path hands itself to the
decode-run walk of sim/cost/runs_past_finishes.py. Those files know the object only by the shape
written here, so they sit below model.py and hot.py instead of importing them back."""

from __future__ import annotations

from typing import Protocol

import numpy as np

from sim.cost.window import Window
from sim.inputs.efficiency import Efficiency
from sim.inputs.model import ModelSpec


class CostModelView(Protocol):
    """The per-GPU facts and formulas of one replica's cost model (sim.cost.model.CostModel)."""

    model: ModelSpec
    eff: Efficiency
    tp: int
    block_size: int
    q_heads_gpu: int
    kv_heads_gpu: int
    act_bytes_el: float
    weight_bytes_el: float
    kv_bytes_per_token_layer_gpu: float
    bandwidth: float
    peak_flops: float
    attn_peak_flops: float
    pair_flops: dict[str, float]
    overhead_s: float
    time_scale: dict[str, float]
    prefill_ratio: object | None  # a measured/smooth ratio table (sim/cost/attention_tables.py)
    decode_ratio: object | None
    window: Window | None
    full_attention_share: float
    mla_context: object | None  # sim.cost.mla.mla_context_shape of an MLA model
    _paged_eff: float

    def layer_time_s(self, n_tokens: int) -> float: ...

    def lm_head_time_s(self, n_sampled: int) -> float: ...

    def mla_context_op(self, context_tokens: np.ndarray): ...


class HotPathView(Protocol):
    """The step-total constants and blends of a cost model's hot path (sim.cost.hot.HotPath)."""

    cost: CostModelView
    block_size: int
    n_layers: int
    overhead_s: float
    launch_s: float
    pair_s: float
    kv_token_bytes: float
    io_token_bytes: float
    kv_bw: float
    negligible_ratio: float
    decode_ratio: object | None
    window: Window | None

    def _blend(self, t_compute: float, t_memory: float) -> float: ...

    def _window_s(self, pairs: float, kv_tokens: float, n_tokens: float, prefill: bool) -> float: ...
