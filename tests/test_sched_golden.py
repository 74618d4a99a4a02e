"""Golden traces: five requests, a constant step time S, TTFT and E2E worked out by hand per policy.

S = 2**-6 s, so every time below is an exact float and the checks use ==.
Block size 16, 1000 blocks (never short), max_model_len 256 (static reserves 16 blocks a request).
"""

from __future__ import annotations

import numpy as np
from conftest import STEP_S, ConstantCost, make_trace

from sim.inputs.config import EngineConfig
from sim.run.simulate import simulate
from sim.run.summary import requests_frame

S = STEP_S
# (arrival, prompt tokens, output tokens); R2 and R3 arrive mid-step.
FIVE = [(0.0, 32, 4), (0.0, 16, 2), (1.5 * S, 48, 3), (2.5 * S, 8, 1), (10 * S, 24, 2)]


def run_frame(trace, **knobs):
    cfg = EngineConfig(num_gpu_blocks_override=1000, max_model_len=256, **knobs)
    return requests_frame(simulate(cfg, trace, cost=ConstantCost()))


def assert_times(frame, ttft_steps, e2e_steps):
    assert (frame["status"] == "FINISHED").all()
    assert frame["ttft_s"].tolist() == [n * S for n in ttft_steps]
    assert frame["e2e_s"].tolist() == [n * S for n in e2e_steps]


def test_static_golden():
    # t=0   R0,R1 waiting; batch {R0,R1}; prefill together [0,1]   -> both first tokens at 1.
    # t=1   decode until the longest (R0 needs 3 more) [1,4]; R1's 2nd token at 2 (its finish),
    #       R0 finishes at 4. R2 (1.5) and R3 (2.5) wait: nobody joins mid-batch.
    # t=4   batch {R2,R3}; prefill [4,5]: first tokens at 5; R3 (1 output) finishes at 5.
    # t=5   decode 2 steps [5,7]; R2 finishes at 7 (R3 is padding).
    # t=10  R4: prefill [10,11], decode [11,12].
    frame = run_frame(make_trace(FIVE), policy="static")
    assert_times(frame, ttft_steps=[1, 1, 5 - 1.5, 5 - 2.5, 1], e2e_steps=[4, 2, 7 - 1.5, 5 - 2.5, 2])
    assert frame["output_tokens"].tolist() == [4, 2, 3, 1, 2]


def test_continuous_golden():
    # t=0   prefill R0+R1 [0,1] -> first tokens at 1.
    # t=1   decode R0,R1 [1,2] (a run stops at R1's completion); R1 finishes at 2.
    # t=2   R2 waiting -> a prefill-only step [2,3] (R0 stalls); R2 first token at 3.
    # t=3   R3 arrived at 2.5 -> prefill [3,4]; its single token ends it at 4.
    # t=4   decode run R0 (2 left), R2 (2 left) [4,6]; both finish at 6.
    # t=10  R4: prefill [10,11], decode [11,12].
    frame = run_frame(make_trace(FIVE), policy="continuous")
    assert_times(frame, ttft_steps=[1, 1, 3 - 1.5, 4 - 2.5, 1], e2e_steps=[6, 2, 6 - 1.5, 4 - 2.5, 2])


def test_chunked_golden():
    # max_num_batched_tokens 32 tokens per step: decodes first, then partial prefills, then new chunks.
    # t=0   R0's 32 prompt tokens fill the budget [0,1]; first token at 1. R1 waits.
    # t=1   R0 decode (1) + R1 whole prompt (16) [1,2]; R1 first token at 2.
    # t=2   R0, R1 decode (2) + R2's first 30 tokens [2,3]; R1 finishes at 3.
    # t=3   R0 decode (1) + R2's last 18 + R3's 8 [3,4]; R0 finishes, R2 and R3 get first tokens,
    #       R3 finishes, all at 4.
    # t=4   decode run of R2 (2 left) [4,6]; finishes at 6.
    # t=10  R4: 24-token chunk [10,11], decode [11,12].
    frame = run_frame(make_trace(FIVE), policy="chunked", max_num_batched_tokens=32)
    assert_times(frame, ttft_steps=[1, 2, 4 - 1.5, 4 - 2.5, 1], e2e_steps=[4, 3, 6 - 1.5, 4 - 2.5, 2])


# Radix: hash ids cover 16 tokens each (= block size, so key = id). Requests never overlap in time.
PREFIXED = [(0.0, 64, 2), (5 * S, 72, 2), (10 * S, 48, 2), (15 * S, 64, 1), (20 * S, 40, 2)]
IDS = [[1, 2, 3, 4], [1, 2, 3, 4, 5], [1, 2, 9], [1, 2, 3, 4], [7, 8, 10]]


def test_radix_golden_prefix_hits_save_chunk_steps():
    # max_num_batched_tokens 32. R0 (64 tokens, ids 1-4): chunks [0,1],[1,2], first token 2, decode -> 3.
    #   Its 4 full blocks are cached (keys 1,2,3,4).
    # R1 at 5 (72 tokens): matches 4 blocks = 64 tokens; 8 left -> one step [5,6], first 6, finish 7.
    # R2 at 10 (48, ids 1,2,9): matches keys 1,2 = 32 tokens; 16 left [10,11] -> ttft 1, e2e 2.
    # R3 at 15 (64, same ids as R0): 4 blocks match but one token must be computed, so only
    #   3 blocks (48 tokens) are used; 16 left [15,16] -> ttft 1, its single token ends it.
    # R4 at 20 (40, ids 7,8,10): no match; 32 + 8 -> first token 22, finish 23.
    trace = make_trace(PREFIXED, IDS, hash_block_tokens=16)
    frame = run_frame(trace, policy="radix", max_num_batched_tokens=32)
    assert frame["cached_tokens"].tolist() == [0, 64, 32, 48, 0]
    assert_times(frame, ttft_steps=[2, 1, 1, 1, 2], e2e_steps=[3, 2, 2, 1, 3])


def test_chunked_without_cache_pays_the_full_prefill():
    # Same trace under chunked: R1 72 -> 32+32+8 (first token 3 steps after arrival), R2 48 -> 2 steps,
    # R3 64 -> 2 steps, R4 as under radix.
    trace = make_trace(PREFIXED, IDS, hash_block_tokens=16)
    frame = run_frame(trace, policy="chunked", max_num_batched_tokens=32)
    assert frame["cached_tokens"].tolist() == [0, 0, 0, 0, 0]
    assert_times(frame, ttft_steps=[2, 3, 2, 2, 2], e2e_steps=[3, 4, 3, 2, 3])


def test_radix_on_continuous_records_hits_without_changing_constant_step_times():
    # radix_chunked=False: whole prefills, so with a constant step the hit saves no step here;
    # the cached tokens are still counted exactly as above.
    trace = make_trace(PREFIXED, IDS, hash_block_tokens=16)
    frame = run_frame(trace, policy="radix", radix_chunked=False)
    assert frame["cached_tokens"].tolist() == [0, 64, 32, 48, 0]
    assert_times(frame, ttft_steps=[1, 1, 1, 1, 1], e2e_steps=[2, 2, 2, 1, 2])


def test_chunked_one_token_tail_gets_first_token():
    # prompt 33, chunk 32: step [0,1] computes 32 tokens, step [1,2] the last one -> first token at 2;
    # three more decode steps -> finish at 5. (Regression: this tail once went down the decode-run
    # path, which never stamped the first token.)
    frame = run_frame(make_trace([(0.0, 33, 4)]), policy="chunked", max_num_batched_tokens=32)
    assert frame["e2e_s"].tolist() == [5 * S]
    assert not np.isnan(frame["first_token_s"][0])
    assert frame["ttft_s"].tolist() == [2 * S]
