"""A decode step's price from three running sums, pre-bound once per run.

In a step of the continuous policy where every running sequence decodes one token, the roofline
cost model (`sim.cost.hot.HotPath.step_parts`) reads only the batch size, the sum of the cached
contexts and the KV tokens in whole blocks, which is the blocks held times the block size. So the
step's time is a function of (n, sum of contexts, blocks held), computed here with the same float
operations in the same order as `HotPath.step_time_s`, bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable

from sim.cost.model import CostModel
from sim.inputs.engines import EngineCost

DecodePrice = Callable[[int, int, int], float]


def bind_decode_price(cost, block_size: int) -> DecodePrice | None:
    """`price(n_sequences, context_tokens, kv_blocks)` for `cost`, or None when `cost` is neither the
    plain roofline model nor an engine preset's wrapper of it (a pipeline, a test double, windowed
    attention, speculative verification): the caller then prices through `cost.step_time_s`."""
    if type(cost) is EngineCost:
        return _bind_engine(cost, block_size)
    return _bind_roofline(cost, block_size)


def _bind_engine(cost: EngineCost, block_size: int) -> DecodePrice | None:
    """`EngineCost.step_time_s` of a decode step (the GPU's price, its graph padding, eager launches
    when no graph is captured for the batch, the engine's CPU time combined), per batch size once."""
    gpu_price = _bind_roofline(cost.gpu, block_size)
    if gpu_price is None:
        return None
    engine = cost.engine
    extras: dict[int, tuple[float, float | None, float]] = {}  # per batch size: padding, eager, CPU seconds

    def price(n: int, context_tokens: int, kv_blocks: int) -> float:
        extra = extras.get(n)
        if extra is None:
            eager = cost._eager.step_s(n, n) if cost._eager is not None and not engine.graphed(n, True) else None
            extra = extras[n] = (cost._padding_s(n, True), eager, engine.cpu_s(n, n, True))
        gpu_s = gpu_price(n, context_tokens, kv_blocks)
        gpu_s += extra[0]
        if extra[1] is not None:
            gpu_s += extra[1]
        return float(engine.combine(gpu_s, extra[2]))

    return price


def _bind_roofline(cost, block_size: int) -> DecodePrice | None:
    if type(cost) is not CostModel or cost.decode_query_max(1) > 1:
        return None
    hot = cost._hot
    if hot.window is not None:
        return None
    attention_s, kv_bw, ratio = hot._attention_s, hot.kv_bw, hot.decode_ratio
    kv_token_bytes, io_token_bytes, pair_s, launch_s = hot.kv_token_bytes, hot.io_token_bytes, hot.pair_s, hot.launch_s
    negligible_ratio = hot.negligible_ratio
    n_layers, overhead_s = hot.n_layers, hot.overhead_s
    layer_time_s, lm_head_time_s = cost.layer_time_s, cost.lm_head_time_s
    fixed_s: dict[int, tuple[float, float]] = {}  # per batch size: (layer ops, LM head)

    def price(n: int, context_tokens: int, kv_blocks: int) -> float:
        fixed = fixed_s.get(n)
        if fixed is None:
            fixed = fixed_s[n] = (layer_time_s(n), lm_head_time_s(n))
        kv_tokens = float(kv_blocks * block_size)
        pairs = float(context_tokens) + 0.5 * n
        t_memory = (kv_tokens * kv_token_bytes + n * io_token_bytes) / kv_bw
        if pairs * pair_s < t_memory * negligible_ratio:  # memory-bound: HotPath._blend gives t_memory itself
            decode_s = t_memory + launch_s
        else:
            decode_s = attention_s(pairs, kv_tokens, n, kv_bw)
        if ratio is not None:
            decode_s *= float(ratio.factor(kv_tokens))
        return n_layers * (fixed[0] + 0.0 + decode_s) + fixed[1] + overhead_s

    return price
