"""Prefix-cache hits of hybrid models (full + sliding-window / chunked-local layers) follow vLLM's
hybrid KV cache manager (sim/engine/kv/window_cache.py): the hit is the longest prefix every layer group
can serve; a sliding-window group needs only the ceil((W-1)/B) blocks before the hit's end, a
chunked-local group only the blocks of the chunk it ends in."""

from __future__ import annotations

import pytest
from conftest import ConstantCost, make_trace

from sim.engine.kv.window_cache import WindowCompanions
from sim.inputs.config import EngineConfig
from sim.inputs.model import load_model
from sim.run.simulate import simulate
from sim.run.summary import requests_frame


def _companions(kind, window, block, cached, reserve=100):
    w = WindowCompanions(kind, window, block, reserve)
    w.hold(0, list(cached))
    return w


def test_sliding_hit_ends_at_the_rightmost_run_of_window_blocks():
    # W=5, B=2: a hit needs the ceil(4/2) = 2 blocks before its end (vLLM's own example:
    # [NULL, NULL, 8, 3, NULL, 9] -> [NULL, NULL, 8, 3])
    path = [10, 11, 12, 13, 14, 15]
    w = _companions("sliding", 5, 2, [12, 13, 15])
    assert w.hit_blocks(path, 6) == 4
    assert w.needed_blocks(path, 4) == [12, 13]
    assert w.hit_blocks(path, 3) == 0  # only block 12 before the bound: no run of 2, block 0 not cached
    # no run of 2 anywhere: the cached run from block 0 is the hit (a prefix shorter than the window)
    assert _companions("sliding", 5, 2, [10, 13, 15]).hit_blocks(path, 6) == 1
    assert _companions("sliding", 5, 2, []).hit_blocks(path, 6) == 0


def test_chunked_hit_needs_only_the_blocks_of_its_last_chunk():
    path = list(range(20, 28))
    # chunk 8 tokens, block 2: a 5-block bound (10 tokens) falls in the chunk starting at block 4
    w = _companions("chunked", 8, 2, [24])
    assert w.hit_blocks(path, 5) == 5 and w.needed_blocks(path, 5) == [24]
    assert _companions("chunked", 8, 2, []).hit_blocks(path, 5) == 4  # the chunk boundary: nothing needed
    assert _companions("chunked", 8, 2, []).hit_blocks(path, 4) == 4


def test_freed_window_blocks_go_oldest_first_and_forgotten_blocks_serve_no_hit():
    w = WindowCompanions("sliding", 5, 2, reserve_blocks=4)
    path = [0, 1, 2, 3, 4, 5]
    w.prompt_computed(7, path, 12)  # window keeps blocks from (12 - 4) // 2 = 4: 0..3 freed
    assert [w.is_cached(b) for b in path] == [False, False, True, True, True, True]  # 0, 1 dropped
    w.release(7)  # 5 then 4 freed (the tail first): the free queue is 2, 3, 5, 4
    w.hold(8, [9, 10])  # two new held blocks push out the two oldest free ones
    assert [w.is_cached(b) for b in path] == [False, False, False, False, True, True]
    w.forget([5])
    assert not w.is_cached(5) and w.n_dropped == 4


# A: 64 full prompt blocks, then B shares A's first 32 blocks, then C repeats B.
def _abc(model_name: str, max_num_seqs: int, n_blocks: int) -> list[int]:
    a = list(range(1, 65))
    b = a[:32] + list(range(100, 132))
    rows = [(0.0, 64 * 16 + 1, 1), (10.0, 64 * 16 + 1, 1), (20.0, 64 * 16 + 1, 1)]
    trace = make_trace(rows, [a, b, b], hash_block_tokens=16)
    cost = ConstantCost()
    cost.model = load_model(model_name)
    cfg = EngineConfig(policy="radix", num_gpu_blocks_override=n_blocks, max_model_len=4096, watermark=0.0,
                       max_num_seqs=max_num_seqs)
    return requests_frame(simulate(cfg, trace, cost=cost))["cached_tokens"].tolist()


def test_gpt_oss_hits_where_its_sliding_layers_still_hold_the_window():
    # gpt-oss: W = 128, B = 16: a hit needs the 8 blocks before its end. A's prompt computed, its
    # window blocks before block 56 are freed, the rest when A leaves; they stay cached in the
    # windowed reserve (max_num_seqs x 9 blocks) or in the pool's free blocks
    assert _abc("gpt-oss-20b", max_num_seqs=256, n_blocks=80) == [0, 32 * 16, 64 * 16]  # the reserve keeps them
    assert _abc("gpt-oss-20b", max_num_seqs=1, n_blocks=1000) == [0, 32 * 16, 64 * 16]  # free pool memory does
    # a 9-block reserve and a nearly full pool (A's 64 cached blocks of 80): only the newest 25 of A's
    # window blocks survive, so B's branch point (block 32 of A) cannot be served; C's repeat of B can
    assert _abc("gpt-oss-20b", max_num_seqs=1, n_blocks=80) == [0, 0, 64 * 16]


@pytest.mark.parametrize("max_num_seqs", [1, 256])
def test_full_attention_models_are_unaffected(max_num_seqs):
    assert _abc("qwen3-8b", max_num_seqs, n_blocks=80) == [0, 32 * 16, 64 * 16]
