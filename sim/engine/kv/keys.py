"""Block keys: one int64 per full KV block of a prompt, derived from the trace's hash ids.

A trace's hash id covers `hash_block_tokens` prompt tokens (Mooncake: 512, Qwen-Bailian: 16);
the simulator's KV block holds `block_size` tokens. Two prompts may share a KV block exactly
when their chains of keys agree up to and including it; the radix tree compares keys along a
chain from the root, so a key need not encode its position.

Only FULL blocks that lie inside both the prompt and the range the ids cover get a key: a
last partial block is never keyed, hence never shared.

Two cases:
- `hash_block_tokens = r * block_size` (ids coarser than blocks): sub-block j of id h gets
  key `h * r + j`, 0 <= j < r. By Euclidean division this map (h, j) -> h*r + j is injective,
  so distinct (id, sub-block) pairs never collide. Ids must satisfy 0 <= h <= (2**63-1)//r - 1
  so the key fits int64; other ids raise InputError.
- `block_size = k * hash_block_tokens` (ids finer than blocks): each group of k consecutive
  ids becomes one key, a 64-bit mix of the k ids in order (splitmix64 finalizer, chained).
  Different groups collide with probability about 2**-64 per pair: for N distinct groups in
  a run, at most N**2 / 2**65 (1e7 groups: under 3e-6). Deterministic, no salted hashing.
"""

from __future__ import annotations

import numpy as np

from sim.errors import InputError

_INT64_MAX = np.iinfo(np.int64).max
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)


def block_keys(
    hash_ids: np.ndarray, hash_block_tokens: int, prompt_tokens: int, block_size: int
) -> np.ndarray:
    """int64 keys, one per full block of `block_size` tokens that the hash ids cover.

    Raises InputError when neither size divides the other.
    """
    hash_ids = np.asarray(hash_ids, dtype=np.int64)
    if hash_block_tokens < 1 or block_size < 1:
        raise InputError("block_size", None, "block sizes must be positive integers")
    covered_tokens = min(int(prompt_tokens), hash_ids.shape[0] * hash_block_tokens)
    n_keys = max(0, covered_tokens) // block_size
    if hash_block_tokens % block_size == 0:
        return _split_ids(hash_ids, hash_block_tokens // block_size, n_keys)
    if block_size % hash_block_tokens == 0:
        return _group_ids(hash_ids, block_size // hash_block_tokens, n_keys)
    raise InputError(
        "block_size",
        None,
        f"must divide the trace's hash block size ({hash_block_tokens} tokens) "
        "or be a multiple of it",
    )


def _split_ids(hash_ids: np.ndarray, n_sub_blocks: int, n_keys: int) -> np.ndarray:
    """Key of block j = hash_ids[j // r] * r + j % r."""
    r = n_sub_blocks
    used = hash_ids[: -(-n_keys // r)]
    if used.size and (used.min() < 0 or used.max() > _INT64_MAX // r - 1):
        raise InputError(
            "hash_ids", None, f"ids must lie in 0..{_INT64_MAX // r - 1} for {r} blocks per id"
        )
    if r == 1:
        return used.copy()
    keys = np.repeat(used * r, r) + np.tile(np.arange(r, dtype=np.int64), used.shape[0])
    return keys[:n_keys]


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer on a uint64 array (wrapping arithmetic), returns a new array."""
    x = x ^ (x >> np.uint64(30))
    x = x * _MIX_1
    x = x ^ (x >> np.uint64(27))
    x = x * _MIX_2
    return x ^ (x >> np.uint64(31))


def _group_ids(hash_ids: np.ndarray, group_size: int, n_keys: int) -> np.ndarray:
    """One key per group of `group_size` consecutive ids: a chained 64-bit mix, in order."""
    groups = hash_ids[: n_keys * group_size].view(np.uint64).reshape(n_keys, group_size)
    state = np.full(n_keys, _GOLDEN, dtype=np.uint64)
    for column in range(group_size):  # loops over the few ids of a group, not over blocks
        state = _mix64(state + _GOLDEN + _mix64(groups[:, column]))
    return state.view(np.int64)
