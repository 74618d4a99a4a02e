"""RadixCache: exact scenarios (splits, eviction order) and a brute-force oracle machine."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from sim.engine.kv.blocks import BlockManager
from sim.engine.kv.radix import RadixCache


def chain(*keys) -> np.ndarray:
    return np.array(keys, dtype=np.int64)


def cached(cache: RadixCache) -> dict[tuple, tuple[int, float]]:
    """Every cached prefix -> (its last block, last access time), read from the tree."""
    out, stack = {}, [(cache._root, ())]
    while stack:
        node, prefix = stack.pop()
        for key, block in zip(node.keys.tolist(), node.blocks):
            prefix = prefix + (key,)
            out[prefix] = (block, node.last_access_s)
        stack.extend((child, prefix) for child in node.children.values())
    return out


def cache_chain(bm, cache, keys, now_s):
    """What a finished request leaves behind: its blocks, cached, its own refs dropped."""
    blocks = bm.allocate(len(keys))
    n_new = cache.insert(keys, blocks, now_s)
    bm.decref(blocks)
    return blocks, n_new


# ---- exact scenarios -----------------------------------------------------------------------


def test_insert_then_match_with_split_on_partial_match():
    bm = BlockManager(16, 16)
    cache = RadixCache(bm)
    blocks, n_new = cache_chain(bm, cache, chain(1, 2, 3, 4), now_s=1.0)
    assert blocks == [0, 1, 2, 3] and n_new == 4
    assert [bm.refcount(b) for b in blocks] == [1, 1, 1, 1]  # the tree's reference
    match = cache.match_prefix(chain(1, 2, 9), now_s=2.0)
    assert match.blocks == [0, 1] and match.n_blocks == 2
    node = match.node
    assert node.keys.tolist() == [1, 2] and node.last_access_s == 2.0
    (rest,) = node.children.values()
    assert rest.keys.tolist() == [3, 4] and rest.blocks == [2, 3] and rest.last_access_s == 1.0
    assert cache.match_prefix(chain(1, 2, 3, 4, 5), 3.0).blocks == [0, 1, 2, 3]
    assert cache.match_prefix(chain(7), 3.0).blocks == []
    assert cache.n_cached_blocks == 4 == cache.n_evictable_blocks


def test_insert_keeps_the_trees_blocks_for_known_keys():
    bm = BlockManager(16, 16)
    cache = RadixCache(bm)
    cache_chain(bm, cache, chain(1, 2), 1.0)  # blocks 0, 1
    mine = bm.allocate(3)  # 0 and 1 are still held by the tree
    assert mine == [2, 3, 4]
    assert cache.insert(chain(1, 2, 3), mine, 2.0) == 1
    assert cache.match_prefix(chain(1, 2, 3), 3.0).blocks == [0, 1, 4]
    assert [bm.refcount(b) for b in mine] == [1, 1, 2]


def test_eviction_order_follows_simulated_time_and_trims_tails():
    bm = BlockManager(16, 16)
    cache = RadixCache(bm)
    cache_chain(bm, cache, chain(1, 2), 1.0)  # blocks 0, 1
    cache_chain(bm, cache, chain(3, 4), 2.0)  # blocks 2, 3
    cache_chain(bm, cache, chain(5), 3.0)  # block 4
    cache.match_prefix(chain(1, 2), 4.0)  # (1, 2) is now the most recent
    assert cache.evict(1) == 1
    assert bm.refcount(3) == 0 and cache.match_prefix(chain(3, 4), 5.0).blocks == [2]
    # (3,) was just touched at 5.0: (5,) at 3.0 goes first, then (1, 2) tail-first
    assert cache.evict(2) == 2
    assert bm.refcount(4) == 0 and bm.refcount(1) == 0 and bm.refcount(0) == 1
    assert cache.evict(10) == 2  # what is left: (1,) at 4.0, then (3,) at 5.0
    assert bm.n_free == 16
    assert cache.n_evicted_blocks == 5 and cache.n_cached_blocks == 0


def test_eviction_ties_go_to_the_older_node():
    bm = BlockManager(16, 16)
    cache = RadixCache(bm)
    cache_chain(bm, cache, chain(9), 1.0)  # block 0, created first
    cache_chain(bm, cache, chain(8), 1.0)  # block 1
    assert cache.evict(1) == 1
    assert bm.refcount(0) == 0 and bm.refcount(1) == 1


def test_locked_path_survives_and_parent_becomes_leaf():
    bm = BlockManager(16, 16)
    cache = RadixCache(bm)
    cache_chain(bm, cache, chain(1, 2, 3), 1.0)  # blocks 0, 1, 2
    cache_chain(bm, cache, chain(1, 2, 7), 2.0)  # (7,) keeps block 5; 3 and 4 are freed
    match = cache.match_prefix(chain(1, 2, 3), 3.0)
    bm.attach_shared(100, match.blocks)
    cache.lock(match.node)
    assert cache.n_evictable_blocks == 1  # only (1, 2, 7)'s last block
    assert cache.evict(10) == 1
    assert cache.match_prefix(chain(1, 2, 3), 4.0).blocks == [0, 1, 2]
    cache.unlock(match.node)
    assert cache.n_evictable_blocks == 3
    assert cache.evict(10) == 0  # the request still holds them: nothing becomes free
    assert bm.free_request(100) == 3 and bm.n_free == 16
    with pytest.raises(RuntimeError):
        cache.unlock(match.node)


# ---- oracle: the set of cached key-chain prefixes -------------------------------------------

N_BLOCKS = 64
key_chains = st.lists(st.integers(0, 2), min_size=0, max_size=7).map(lambda k: chain(*k))


class RadixMachine(RuleBasedStateMachine):
    """Model: dict prefix -> block; locks as (node, request id, locked prefixes)."""

    def __init__(self):
        super().__init__()
        self.bm = BlockManager(N_BLOCKS, 16)
        self.cache = RadixCache(self.bm)
        self.model: dict[tuple, int] = {}
        self.locks: list[tuple[object, int, set]] = []
        self.now_s = 0.0
        self.next_req = 0

    def tick(self) -> float:
        self.now_s += 1.0
        return self.now_s

    def locked_prefixes(self) -> set:
        return set().union(*(prefixes for _, _, prefixes in self.locks))

    def expected_match(self, keys) -> list[int]:
        blocks = []
        for i in range(1, len(keys) + 1):
            if tuple(keys[:i].tolist()) not in self.model:
                break
            blocks.append(self.model[tuple(keys[:i].tolist())])
        return blocks

    @rule(keys=key_chains)
    def insert(self, keys):
        if len(keys) > self.bm.n_free:
            return
        blocks, n_new = cache_chain(self.bm, self.cache, keys, self.tick())
        expected_new = 0
        for i in range(1, len(keys) + 1):
            prefix = tuple(keys[:i].tolist())
            if prefix not in self.model:
                self.model[prefix] = blocks[i - 1]
                expected_new += 1
        assert n_new == expected_new

    @rule(keys=key_chains)
    def match(self, keys):
        assert self.cache.match_prefix(keys, self.tick()).blocks == self.expected_match(keys)

    @rule(keys=key_chains)
    def match_and_lock(self, keys):
        match = self.cache.match_prefix(keys, self.tick())
        self.next_req += 1
        self.bm.attach_shared(self.next_req, match.blocks)
        self.cache.lock(match.node)
        prefixes = {tuple(keys[:i].tolist()) for i in range(1, match.n_blocks + 1)}
        self.locks.append((match.node, self.next_req, prefixes))

    @precondition(lambda self: self.locks)
    @rule(data=st.data())
    def unlock(self, data):
        node, req, _ = self.locks.pop(data.draw(st.integers(0, len(self.locks) - 1)))
        self.cache.unlock(node)
        self.bm.free_request(req)

    @rule(n=st.integers(0, 10))
    def evict(self, n):
        before = cached(self.cache)
        locked = self.locked_prefixes()
        n_freed = self.cache.evict(n)
        after = cached(self.cache)
        removed = set(before) - set(after)
        assert set(after) <= set(before) and not removed & locked
        assert all(p[:-1] in after or len(p) == 1 for p in after)  # still prefix-closed
        assert n_freed == len(removed) == min(n, len(set(before) - locked))
        leaves = [p for p in after if p not in locked and not any(q[:-1] == p for q in after)]
        if removed and leaves:  # LRU: nothing kept is older than what went
            assert max(before[p][1] for p in removed) <= min(after[p][1] for p in leaves)
        for p in removed:
            assert self.bm.refcount(self.model.pop(p)) == 0

    @invariant()
    def tree_matches_model(self):
        tree = cached(self.cache)
        assert {p: block for p, (block, _) in tree.items()} == self.model
        assert self.cache.n_cached_blocks == len(self.model)
        assert self.cache.n_evictable_blocks == len(set(self.model) - self.locked_prefixes())
        assert self.bm.n_used == len(set(self.model.values()))

    def teardown(self):
        while self.locks:
            node, req, _ = self.locks.pop()
            self.cache.unlock(node)
            self.bm.free_request(req)
        assert self.cache.evict(N_BLOCKS) == len(self.model)
        assert self.bm.n_free == N_BLOCKS and self.cache.n_cached_blocks == 0


RadixMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None, derandomize=True
)
TestRadixOracle = RadixMachine.TestCase


def test_cached_prefix_blocks_peeks_without_touching_or_splitting():
    from sim.engine.kv.blocks import BlockManager
    from sim.engine.kv.radix import RadixCache

    blocks = BlockManager(16, 4)
    cache = RadixCache(blocks)
    table = blocks.allocate(4)
    cache.insert(np.array([1, 2, 3, 4]), table, now_s=1.0)
    blocks.decref(table)
    assert cache.cached_prefix_blocks(np.array([1, 2, 9])) == 2
    assert cache.cached_prefix_blocks(np.array([1, 2, 3, 4, 5])) == 4
    assert cache.cached_prefix_blocks(np.array([7])) == 0
    # the peek neither split the 4-block edge nor refreshed its time: eviction still takes the whole
    # leaf tail-first and the root has one child
    assert len(cache._root.children) == 1 and cache._root.children[1].keys.shape[0] == 4
    assert cache.evict(4) == 4
