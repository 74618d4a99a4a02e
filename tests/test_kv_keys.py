"""block_keys: Mooncake (coarse ids) and Qwen (fine ids) shapes, partial blocks, bad sizes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.engine.kv.keys import block_keys
from sim.errors import InputError


def test_mooncake_512_token_ids_on_16_token_blocks():
    ids = np.array([0, 46, 47], dtype=np.int64)
    keys = block_keys(ids, hash_block_tokens=512, prompt_tokens=1200, block_size=16)
    # 1200 tokens -> 75 full blocks (the 76th, tokens 1200..1215, would be partial: not keyed)
    assert keys.shape == (75,) and keys.dtype == np.int64
    assert list(keys[:3]) == [0, 1, 2]
    assert keys[31] == 31
    assert list(keys[32:34]) == [46 * 32, 46 * 32 + 1]
    assert keys[64] == 47 * 32 and keys[74] == 47 * 32 + 10


def test_keys_stop_where_the_ids_stop():
    ids = np.array([5], dtype=np.int64)  # covers 512 tokens of a 2000-token prompt
    keys = block_keys(ids, 512, prompt_tokens=2000, block_size=16)
    assert list(keys) == list(range(5 * 32, 6 * 32))


def test_shared_id_prefix_shares_key_prefix_exactly():
    a = block_keys(np.array([0, 1, 2]), 512, 1536, 16)
    b = block_keys(np.array([0, 1, 9]), 512, 1536, 16)
    same = a == b
    assert same[:64].all() and not same[64:].any()


def test_qwen_16_token_ids_on_32_token_blocks():
    ids = np.array([3, 4, 3, 4, 4, 3, 8], dtype=np.int64)
    keys = block_keys(ids, hash_block_tokens=16, prompt_tokens=100, block_size=32)
    # 100 tokens -> 3 full blocks of 32 (tokens 96..99 are a partial block, not keyed)
    assert keys.shape == (3,)
    assert keys[0] == keys[1]  # same ids (3, 4) in the same order
    assert keys[2] != keys[0]  # (4, 3): order matters
    again = block_keys(ids.copy(), 16, 100, 32)
    assert np.array_equal(keys, again)  # deterministic, no salted hashing
    assert list(block_keys(ids, 16, 100, 16)[:3]) == [3, 4, 3]  # equal sizes: the ids


def test_partial_block_below_one_block_has_no_key():
    assert block_keys(np.array([1]), 512, 15, 16).shape == (0,)
    assert block_keys(np.array([], dtype=np.int64), 512, 900, 16).shape == (0,)


def test_sizes_that_do_not_divide_raise_input_error():
    with pytest.raises(InputError) as error:
        block_keys(np.array([1, 2]), 512, 1024, 48)
    assert error.value.where == "block_size"
    assert "512 tokens" in error.value.line()


def test_ids_that_would_overflow_raise_input_error():
    with pytest.raises(InputError):
        block_keys(np.array([2**62]), 512, 512, 16)
    with pytest.raises(InputError):
        block_keys(np.array([-1]), 512, 512, 16)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    ids=st.lists(st.integers(0, 2**40), min_size=1, max_size=40, unique=True),
    r=st.sampled_from([1, 2, 4, 32]),
)
def test_split_keys_are_injective_and_follow_the_formula(ids, r):
    block_size = 16
    ids = np.array(ids, dtype=np.int64)
    keys = block_keys(ids, block_size * r, prompt_tokens=10**9, block_size=block_size)
    assert keys.shape == (len(ids) * r,)
    assert len(set(keys.tolist())) == keys.shape[0]
    j = np.arange(keys.shape[0])
    assert np.array_equal(keys, ids[j // r] * r + j % r)


def test_grouped_keys_do_not_collide_on_many_groups():
    rng = np.random.default_rng(7)
    ids = rng.integers(0, 1000, size=400_000, dtype=np.int64)  # many repeated ids
    keys = block_keys(ids, hash_block_tokens=16, prompt_tokens=16 * ids.size, block_size=64)
    groups = {tuple(g) for g in ids.reshape(-1, 4).tolist()}
    assert len(set(keys.tolist())) == len(groups)
