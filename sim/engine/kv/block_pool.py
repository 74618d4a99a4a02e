"""A pool of block ids 0..capacity-1 with reference counts (`sim.engine.kv.blocks.BlockManager` keeps
one for the GPU and one for CPU swap blocks).

Nothing is built per block up front: a pool keeps a "next never-used id" counter, a stack of
freed ids and a reference-count list that grows only as far as ids have been handed out, so
`num_gpu_blocks_override=5_000_000` costs nothing until the blocks are used. Every
allocate/incref/decref is O(1) per block.

Until a block is first shared (incref: a prefix-cache hit, a forked sample) every handed-out id
has count 1, so a pool keeps no counts at all: handing out and freeing a table is a slice of the
free stack, not a pass over its ids. The first incref, decref or count query builds the list
(1 for ids handed out, 0 for freed ones) and the pool counts from then on.
"""

from __future__ import annotations

from operator import itemgetter


class NoFreeBlocks(RuntimeError):
    """Not enough free blocks; the operation that raised it changed nothing."""


class BlockPool:
    """Ids 0..capacity-1 with reference counts; O(1) allocate/free per id.

    Reference counts live in a Python list that grows only as ids are first handed out (so a pool
    of millions of blocks costs nothing until used), and only once something is shared
    (`counting`; see the module docstring); a plain list beats numpy for the few ids a step touches.
    """

    def __init__(self, capacity: int, name: str):
        if capacity < 0:
            raise ValueError(f"{name} capacity must be >= 0, got {capacity}")
        self.capacity = capacity
        self.name = name
        self.next_unused = 0  # ids >= next_unused were never handed out
        self.freed: list[int] = []  # stack of ids with refcount 0 below next_unused
        self.refcounts: list[int] = []  # one per id below next_unused, once `counting`
        self.counting = False  # False: nothing was ever shared, every handed-out id has count 1

    def _count_references(self) -> None:
        """Start keeping counts: 1 for every id handed out, 0 for freed ones (nothing was shared)."""
        if not self.counting:
            refcounts = [1] * self.next_unused
            for block in self.freed:
                refcounts[block] = 0
            self.refcounts, self.counting = refcounts, True

    @property
    def n_free(self) -> int:
        return len(self.freed) + self.capacity - self.next_unused

    def allocate(self, n: int) -> list[int]:
        freed, refcounts = self.freed, self.refcounts
        if not 0 <= n <= len(freed) + self.capacity - self.next_unused:
            if n < 0:
                raise ValueError(f"cannot allocate {n} blocks")
            raise NoFreeBlocks(f"{self.name}: need {n} blocks, {self.n_free} free")
        if n == 1 and freed:  # the common case in a decode loop
            block = freed.pop()
            if self.counting:
                refcounts[block] = 1
            return [block]
        n_reused = min(n, len(freed))
        ids = freed[len(freed) - n_reused :]
        ids.reverse()  # the most recently freed id comes first
        del freed[len(freed) - n_reused :]
        if self.counting:
            for block in ids:
                refcounts[block] = 1
        n_new = n - n_reused
        if n_new:
            start = self.next_unused
            if self.counting:
                refcounts.extend([1] * n_new)
            ids.extend(range(start, start + n_new))
            self.next_unused = start + n_new
        return ids

    def is_shared(self, block: int) -> bool:
        """Whether a handed-out id has more than one reference."""
        return self.counting and self.refcounts[block] > 1

    def incref(self, blocks) -> None:
        self._count_references()
        refcounts = self.refcounts
        for block in blocks:
            if not 0 <= block < len(refcounts) or refcounts[block] <= 0:
                raise RuntimeError(f"{self.name}: incref of free block {block}")
            refcounts[block] += 1

    def decref(self, blocks) -> int:
        """Drop one reference per listed block (in order); freed ids go on the reuse stack in
        that order, so the last listed is reused first."""
        self._count_references()
        refcounts, freed = self.refcounts, self.freed
        n_freed = 0
        for block in blocks:
            if not 0 <= block < len(refcounts):
                raise RuntimeError(f"{self.name}: decref of free block {block}")
            count = refcounts[block] - 1
            if count < 0:
                raise RuntimeError(f"{self.name}: decref of free block {block}")
            refcounts[block] = count
            if count == 0:
                freed.append(block)
                n_freed += 1
        return n_freed

    def release(self, blocks: list[int]) -> int:
        """`decref` of a table's blocks, each known to hold a reference (ids handed out by this
        pool): when every count is 1 (nothing shared, the common case) they are all freed in one
        pass without per-block checks, or without any pass when the pool keeps no counts."""
        if not self.counting:
            self.freed.extend(blocks)
            return len(blocks)
        if len(blocks) > 1:
            refcounts = self.refcounts
            counts = itemgetter(*blocks)(refcounts)
            if counts.count(1) == len(counts):
                for block in blocks:
                    refcounts[block] = 0
                self.freed.extend(blocks)
                return len(blocks)
        return self.decref(blocks)

    def release_table(self, table: list[int]) -> int:
        """`release` of a table's blocks from its last to its first (so the next allocation of the same
        size gets them back in table order)."""
        if not self.counting:
            self.freed.extend(reversed(table))
            return len(table)
        return self.release(table[::-1])

    def refcount(self, block: int) -> int:
        if not 0 <= block < self.capacity:
            raise IndexError(f"{self.name}: block {block} outside 0..{self.capacity - 1}")
        self._count_references()
        return self.refcounts[block] if block < self.next_unused else 0
