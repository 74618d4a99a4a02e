"""BlockManager: exact scenarios, then a hypothesis state machine against a brute-force model."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from sim.engine.kv.block_pool import NoFreeBlocks
from sim.engine.kv.blocks import BlockManager

# ---- exact scenarios -----------------------------------------------------------------------


def test_fresh_ids_then_lifo_reuse():
    bm = BlockManager(n_blocks=8, block_size=16)
    assert bm.allocate(3) == [0, 1, 2]
    assert bm.allocate(2) == [3, 4]
    assert bm.decref([1, 3]) == 2
    # most recently freed first, then never-used ids in order
    assert bm.allocate(3) == [3, 1, 5]
    assert bm.n_free == 2 and bm.n_used == 6


def test_free_request_returns_same_ids_in_order():
    bm = BlockManager(n_blocks=10, block_size=4)
    assert bm.grow(7, 10) == 3
    assert bm.table(7) == [0, 1, 2]
    assert bm.free_request(7) == 3
    assert bm.table(7) == []
    assert bm.allocate(3) == [0, 1, 2]


def test_allocate_short_changes_nothing():
    bm = BlockManager(n_blocks=4, block_size=16)
    bm.allocate(3)
    with pytest.raises(NoFreeBlocks):
        bm.allocate(2)
    assert bm.n_free == 1
    assert bm.allocate(1) == [3]


def test_grow_short_changes_nothing():
    bm = BlockManager(n_blocks=3, block_size=16)
    bm.grow(1, 20)  # 2 blocks
    with pytest.raises(NoFreeBlocks):
        bm.grow(1, 64)  # would need 2 more, only 1 free
    assert bm.table(1) == [0, 1]
    assert bm.n_free == 1
    assert bm.blocks_needed(1, 32) == 0
    assert bm.blocks_needed(1, 33) == 1


def test_watermark_only_for_new_requests():
    bm = BlockManager(n_blocks=10, block_size=16, watermark_blocks=2)
    bm.allocate(7)
    assert bm.can_allocate(3)
    assert not bm.can_allocate(3, use_watermark=True)
    assert bm.can_allocate(1, use_watermark=True)


def test_decref_below_zero_is_a_bug():
    bm = BlockManager(n_blocks=4, block_size=16)
    (block,) = bm.allocate(1)
    bm.decref([block])
    with pytest.raises(RuntimeError):
        bm.decref([block])
    with pytest.raises(RuntimeError):
        bm.incref([block])


def test_copy_on_write_of_shared_partial_last_block():
    bm = BlockManager(n_blocks=8, block_size=4)
    bm.grow(1, 6)  # prompt of 6 tokens: blocks [0, 1], block 1 half full
    bm.fork(1, 2)  # second sample shares both
    assert bm.table(2) == [0, 1] and bm.refcount(1) == 2
    # the child writes token 6, inside the shared last block: it gets its own copy
    assert bm.prepare_write(2, 6) is True
    assert bm.table(2) == [0, 2]
    assert bm.refcount(1) == 1 and bm.refcount(2) == 1 and bm.refcount(0) == 2
    # the parent is now the only holder of block 1: no copy
    assert bm.prepare_write(1, 6) is False
    assert bm.table(1) == [0, 1]
    # a write at a block boundary needs a new block, not a copy
    assert bm.prepare_write(2, 8) is False
    assert bm.n_cow_copies == 1
    assert bm.free_request(1) == 1  # block 1; block 0 still held by request 2
    assert bm.free_request(2) == 2
    assert bm.n_free == 8


def test_copy_on_write_short_changes_nothing():
    bm = BlockManager(n_blocks=2, block_size=4)
    bm.grow(1, 6)
    bm.fork(1, 2)
    with pytest.raises(NoFreeBlocks):
        bm.prepare_write(2, 6)
    assert bm.table(2) == [0, 1] and bm.refcount(1) == 2 and bm.n_cow_copies == 0


def test_swap_out_and_in_with_a_shared_block():
    bm = BlockManager(n_blocks=6, block_size=4, n_cpu_blocks=3)
    bm.grow(1, 8)  # [0, 1]
    bm.fork(1, 2)
    bm.grow(2, 12)  # [0, 1, 2]
    assert bm.swap_out(2) == 3
    assert bm.is_swapped(2) and bm.table(2) == []
    # blocks 0 and 1 stay for request 1; only block 2 became free
    assert bm.refcount(0) == 1 and bm.refcount(2) == 0 and bm.n_free == 4
    assert bm.n_cpu_free == 0
    with pytest.raises(NoFreeBlocks):
        bm.swap_out(1)  # CPU full
    with pytest.raises(RuntimeError):
        bm.grow(2, 16)  # must swap in first
    assert bm.swap_in(2) == 3
    assert bm.table(2) == [2, 3, 4]  # fresh blocks: LIFO freed id 2, then new ids
    assert bm.n_cpu_free == 3 and not bm.is_swapped(2)
    assert (bm.n_swapped_out_blocks, bm.n_swapped_in_blocks) == (3, 3)


def test_swap_in_short_changes_nothing():
    bm = BlockManager(n_blocks=3, block_size=4, n_cpu_blocks=3)
    bm.grow(1, 12)
    bm.swap_out(1)
    bm.allocate(2)
    with pytest.raises(NoFreeBlocks):
        bm.swap_in(1)
    assert bm.is_swapped(1) and bm.n_cpu_free == 0 and bm.n_free == 1


@pytest.mark.parametrize("shared", [(), (1,), (0, 3)])
def test_release_of_a_table_matches_decref(shared):
    """The one-pass release (every count 1) and the per-block fallback (something shared) free the
    same ids in the same order as decref, and leave the same counts."""
    managers = [BlockManager(n_blocks=8, block_size=4) for _ in range(2)]
    for bm in managers:
        bm.allocate(2)  # ids 0, 1 stay in use, so the table below is not the whole pool
        table = bm.allocate(4)
        bm.incref([table[i] for i in shared])
    released = managers[0]._gpu.release(table[::-1])
    decrefed = managers[1].decref(table[::-1])
    assert released == decrefed == 4 - len(shared)
    assert [managers[0].refcount(b) for b in range(8)] == [managers[1].refcount(b) for b in range(8)]
    n_free = managers[1].n_free
    assert managers[0].allocate(n_free) == managers[1].allocate(n_free)


def _churn(bm: BlockManager, seed: int) -> list:
    """Random grow / free / swap traffic of unshared tables; returns everything observable."""
    import random

    rng, seen = random.Random(seed), []
    for _ in range(400):
        req = rng.randrange(6)
        action = rng.random()
        try:
            if action < 0.5 and not bm.is_swapped(req):
                bm.grow(req, len(bm.table(req)) * 4 + rng.randrange(1, 9))
            elif action < 0.7:
                seen.append(bm.free_request(req))
            elif action < 0.85 and bm.table(req):
                seen.append(bm.swap_out(req))
            elif bm.is_swapped(req):
                seen.append(bm.swap_in(req))
        except NoFreeBlocks:
            seen.append("short")
        seen.append((bm.n_free, bm.n_cpu_free, [bm.table(r) for r in range(6)]))
    return seen


def test_a_pool_keeps_no_counts_until_something_is_shared():
    """Unshared traffic hands out the same ids whether or not counts are kept; the first count
    query or incref builds the counts the pool would have kept (1 handed out, 0 freed)."""
    lazy, counted = BlockManager(n_blocks=20, block_size=4, n_cpu_blocks=10), BlockManager(20, 4, n_cpu_blocks=10)
    counted.refcount(0)  # counts from the start
    assert not lazy._gpu.counting and counted._gpu.counting
    assert _churn(lazy, seed=3) == _churn(counted, seed=3)
    assert not lazy._gpu.counting
    assert [lazy.refcount(b) for b in range(20)] == [counted.refcount(b) for b in range(20)]
    held = next(r for r in range(6) if len(lazy.table(r)) > 1)
    for bm in (lazy, counted):
        bm.fork(held, 99)  # now shared: nothing is freed while the fork holds the blocks
    assert lazy._gpu.counting
    assert lazy.free_request(held) == counted.free_request(held) == 0
    assert lazy.free_request(99) == counted.free_request(99) > 1
    assert _churn(lazy, seed=4) == _churn(counted, seed=4)


def test_millions_of_blocks_cost_nothing_up_front():
    bm = BlockManager(n_blocks=5_000_000, block_size=16)
    assert bm.n_free == 5_000_000
    assert bm.allocate(2) == [0, 1]
    assert bm.refcount(4_999_999) == 0


# ---- oracle: a brute-force model under random operation sequences -------------------------

N_BLOCKS, N_CPU, BLOCK_SIZE = 12, 6, 4


class BlockManagerMachine(RuleBasedStateMachine):
    """Model: a refcount dict over every id, token counts and plain lists for tables."""

    def __init__(self):
        super().__init__()
        self.bm = BlockManager(N_BLOCKS, BLOCK_SIZE, watermark_blocks=2, n_cpu_blocks=N_CPU)
        self.refs = {b: 0 for b in range(N_BLOCKS)}
        self.tables: dict[int, list[int]] = {}  # resident requests
        self.swapped: dict[int, int] = {}  # req -> n CPU blocks
        self.loose: list[list[int]] = []  # raw allocations outside any table
        self.next_req = 0

    def model_free(self) -> int:
        return sum(1 for c in self.refs.values() if c == 0)

    def new_req(self) -> int:
        self.next_req += 1
        return self.next_req

    @rule(n=st.integers(0, 5))
    def allocate(self, n):
        if n > self.model_free():
            with pytest.raises(NoFreeBlocks):
                self.bm.allocate(n)
            return
        got = self.bm.allocate(n)
        assert len(set(got)) == n and all(self.refs[b] == 0 for b in got)
        for b in got:
            self.refs[b] = 1
        self.loose.append(got)

    @precondition(lambda self: self.loose)
    @rule(data=st.data())
    def decref_loose(self, data):
        blocks = self.loose.pop(data.draw(st.integers(0, len(self.loose) - 1)))
        expected = 0
        for b in blocks:
            self.refs[b] -= 1
            expected += self.refs[b] == 0
        assert self.bm.decref(blocks) == expected

    @rule(data=st.data(), n_tokens=st.integers(0, 30))
    def grow(self, data, n_tokens):
        choices = sorted(self.tables) + [None]
        req = data.draw(st.sampled_from(choices))
        req = self.new_req() if req is None else req
        table = self.tables.get(req, [])
        need = max(0, -(-n_tokens // BLOCK_SIZE) - len(table))
        assert self.bm.blocks_needed(req, n_tokens) == need
        if need > self.model_free():
            with pytest.raises(NoFreeBlocks):
                self.bm.grow(req, n_tokens)
            return
        assert self.bm.grow(req, n_tokens) == need
        new = self.bm.table(req)[len(table) :]
        assert len(new) == need and all(self.refs[b] == 0 for b in new)
        for b in new:
            self.refs[b] = 1
        self.tables[req] = table + new

    @precondition(lambda self: self.tables)
    @rule(data=st.data())
    def fork(self, data):
        parent = data.draw(st.sampled_from(sorted(self.tables)))
        child = self.new_req()
        self.bm.fork(parent, child)
        self.tables[child] = list(self.tables[parent])
        for b in self.tables[child]:
            self.refs[b] += 1

    @precondition(lambda self: self.tables)
    @rule(data=st.data(), n_shared=st.integers(0, 4))
    def attach_shared(self, data, n_shared):
        source = data.draw(st.sampled_from(sorted(self.tables)))
        shared = self.tables[source][:n_shared]
        req = self.new_req()
        self.bm.attach_shared(req, shared)
        self.tables[req] = list(shared)
        for b in shared:
            self.refs[b] += 1

    @precondition(lambda self: self.tables)
    @rule(data=st.data(), position=st.integers(0, 30))
    def prepare_write(self, data, position):
        req = data.draw(st.sampled_from(sorted(self.tables)))
        table = self.tables[req]
        index = position // BLOCK_SIZE
        copies = index < len(table) and self.refs[table[index]] > 1
        if copies and self.model_free() == 0:
            with pytest.raises(NoFreeBlocks):
                self.bm.prepare_write(req, position)
            return
        assert self.bm.prepare_write(req, position) == copies
        if copies:
            new = self.bm.table(req)[index]
            assert self.refs[new] == 0
            self.refs[table[index]] -= 1
            self.refs[new] = 1
            table[index] = new

    @precondition(lambda self: self.tables or self.swapped)
    @rule(data=st.data())
    def free_request(self, data):
        req = data.draw(st.sampled_from(sorted(self.tables) + sorted(self.swapped)))
        expected = 0
        for b in self.tables.pop(req, []):
            self.refs[b] -= 1
            expected += self.refs[b] == 0
        self.swapped.pop(req, None)
        assert self.bm.free_request(req) == expected

    @precondition(lambda self: self.tables)
    @rule(data=st.data())
    def swap_out(self, data):
        req = data.draw(st.sampled_from(sorted(self.tables)))
        n = len(self.tables[req])
        if n > N_CPU - sum(self.swapped.values()):
            with pytest.raises(NoFreeBlocks):
                self.bm.swap_out(req)
            return
        assert self.bm.swap_out(req) == n
        for b in self.tables.pop(req):
            self.refs[b] -= 1
        self.swapped[req] = n

    @precondition(lambda self: self.swapped)
    @rule(data=st.data())
    def swap_in(self, data):
        req = data.draw(st.sampled_from(sorted(self.swapped)))
        n = self.swapped[req]
        if n > self.model_free():
            with pytest.raises(NoFreeBlocks):
                self.bm.swap_in(req)
            return
        assert self.bm.swap_in(req) == n
        table = self.bm.table(req)
        assert len(table) == n and all(self.refs[b] == 0 for b in table)
        for b in table:
            self.refs[b] = 1
        self.tables[req] = list(table)
        del self.swapped[req]

    @invariant()
    def matches_model(self):
        bm = self.bm
        assert bm.n_free + bm.n_used == N_BLOCKS
        assert bm.n_free == self.model_free()
        assert all(bm.refcount(b) == c >= 0 for b, c in self.refs.items())
        pool = bm._gpu  # the free stack plus never-used ids are exactly the refcount-0 ids
        free_ids = pool.freed + list(range(pool.next_unused, N_BLOCKS))
        assert sorted(free_ids) == sorted(b for b, c in self.refs.items() if c == 0)
        for req, table in self.tables.items():
            assert bm.table(req) == table
            assert all(self.refs[b] >= 1 for b in table)
        assert bm.n_cpu_free == N_CPU - sum(self.swapped.values())
        assert all(bm.is_swapped(r) for r in self.swapped)
        assert bm.can_allocate(self.model_free()) and not bm.can_allocate(self.model_free() + 1)


BlockManagerMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None, derandomize=True
)
TestBlockManagerOracle = BlockManagerMachine.TestCase
