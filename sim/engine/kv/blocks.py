"""Paged KV blocks of one replica: ids, reference counts, block tables, copy-on-write, swap.

Id order (tests rely on it): `allocate` hands out the most recently freed ids first (a LIFO
stack), then ids never used before in increasing order. A fresh manager's first `allocate(3)`
gives `[0, 1, 2]`. `decref(blocks)` pushes freed ids in the order given; `free_request` and
`swap_out` release a table from its last block to its first, so the next allocation of the
same size gets the same ids back in the same order.

The pools of ids and reference counts behind it are `sim.engine.kv.block_pool.BlockPool`.

Swap rule: `swap_out` gives the request a private CPU copy of *every* block in its table (CPU
blocks are never shared) and drops its reference on the GPU blocks; a GPU block shared with
another request or the prefix cache stays resident for them, so only blocks whose count
reaches 0 are freed. `swap_in` allocates fresh GPU blocks (sharing is not restored) and frees
the CPU copies.
"""

from __future__ import annotations

from sim.engine.kv.block_pool import BlockPool


class BlockManager:
    """Physical KV blocks of one replica (ids 0..n_blocks-1) plus optional CPU swap blocks.

    A request's table lists its blocks in token order: token t lives in block
    `table[t // block_size]`. Tables hold references; the prefix cache holds its own.
    """

    def __init__(
        self, n_blocks: int, block_size: int, watermark_blocks: int = 0, n_cpu_blocks: int = 0
    ):
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        if not 0 <= watermark_blocks <= n_blocks:
            raise ValueError(f"watermark_blocks must lie in 0..{n_blocks}, got {watermark_blocks}")
        self.block_size = block_size
        self.n_blocks = n_blocks
        self.n_cpu_blocks = n_cpu_blocks
        self.watermark_blocks = watermark_blocks
        self._gpu = BlockPool(n_blocks, "GPU")
        self._cpu = BlockPool(n_cpu_blocks, "CPU")
        self._tables: dict[int, list[int]] = {}
        self._swapped: dict[int, list[int]] = {}  # req id -> its CPU blocks
        self.n_cow_copies = 0
        self.n_swapped_out_blocks = 0
        self.n_swapped_in_blocks = 0

    # ---- pool level -------------------------------------------------------------------------
    @property
    def n_free(self) -> int:
        """GPU blocks with reference count 0."""
        return self._gpu.n_free

    @property
    def n_used(self) -> int:
        return self.n_blocks - self._gpu.n_free

    @property
    def n_cpu_free(self) -> int:
        return self._cpu.n_free

    def can_allocate(self, n: int, use_watermark: bool = False) -> bool:
        """True if n blocks are free; admitting a NEW request (use_watermark) keeps the watermark free."""
        reserve = self.watermark_blocks if use_watermark else 0
        return self._gpu.n_free - reserve >= n

    def allocate(self, n: int) -> list[int]:
        """n blocks with reference count 1; NoFreeBlocks (nothing allocated) if short."""
        return self._gpu.allocate(n)

    def incref(self, blocks) -> None:
        self._gpu.incref(blocks)

    def decref(self, blocks) -> int:
        """Drop one reference per listed block; returns how many became free."""
        return self._gpu.decref(blocks)

    def refcount(self, block: int) -> int:
        return self._gpu.refcount(block)

    def cpu_refcount(self, block: int) -> int:
        return self._cpu.refcount(block)

    # ---- request tables ---------------------------------------------------------------------
    def table(self, req_id: int) -> list[int]:
        """The request's live block table (do not mutate); empty if unknown or swapped out."""
        return self._tables.get(req_id, [])

    def blocks_needed(self, req_id: int, n_tokens: int) -> int:
        """Extra blocks the request needs so its table covers n_tokens tokens in total."""
        n_covering = -(-n_tokens // self.block_size)
        return max(0, n_covering - len(self._tables.get(req_id, ())))

    def grow(self, req_id: int, n_tokens: int) -> int:
        """Extend the table to cover n_tokens; returns the number of new blocks.

        NoFreeBlocks (nothing changed) if the GPU is short.
        """
        table = self._tables.get(req_id)
        n_new = -(-n_tokens // self.block_size) - (0 if table is None else len(table))
        if n_new <= 0:
            return 0  # the hot path: the next token still fits in the last block
        if req_id in self._swapped:
            self._require_resident(req_id)
        new_blocks = self._gpu.allocate(n_new)
        if table is None:
            self._tables[req_id] = new_blocks
        else:
            table.extend(new_blocks)
        return n_new

    def grow_many(self, req_ids, n_tokens) -> int:
        """`grow` for several requests at once, from one pool allocation (the decode hot path).
        NoFreeBlocks (nothing changed) if the GPU is short. Returns the number of new blocks."""
        size, tables = self.block_size, self._tables
        needs = [-(-n // size) - len(tables.get(r, ())) for r, n in zip(req_ids, n_tokens)]
        return self.grow_by(list(req_ids), [max(need, 0) for need in needs])

    def grow_by(self, req_ids: list[int], n_new: int | list[int]) -> int:
        """Add `n_new` blocks (one count for all, or one per request) to each listed table, from
        one pool allocation handed out in list order (the decode hot path). NoFreeBlocks (nothing
        changed) if the GPU is short. Returns the number of new blocks."""
        total = n_new * len(req_ids) if isinstance(n_new, int) else sum(n_new)
        if not total:
            return 0
        swapped = self._swapped
        if swapped:
            for r in req_ids:
                self._require_resident(r)
        if not isinstance(n_new, int) and max(n_new) == 1:  # one each for some (a decode run's usual growth)
            req_ids, n_new = [r for r, need in zip(req_ids, n_new) if need], 1
        new_blocks = self._gpu.allocate(total)
        tables = self._tables
        if n_new == 1:  # one each
            for r, block in zip(req_ids, new_blocks):
                table = tables.get(r)
                if table is None:
                    tables[r] = [block]
                else:
                    table.append(block)
            return total
        counts = [n_new] * len(req_ids) if isinstance(n_new, int) else n_new
        start = 0
        for r, need in zip(req_ids, counts):
            if need:
                tables.setdefault(r, []).extend(new_blocks[start : start + need])
                start += need
        return total

    def attach_shared(self, req_id: int, blocks: list[int]) -> None:
        """Start the request's table with shared blocks (a prefix-cache hit); increfs each."""
        if self._tables.get(req_id) or req_id in self._swapped:
            raise RuntimeError(f"request {req_id} already has blocks")
        self._gpu.incref(blocks)
        self._tables[req_id] = list(blocks)

    def fork(self, parent_id: int, child_id: int) -> None:
        """The child's table becomes the parent's blocks, each incref'd (parallel sampling)."""
        self._require_resident(parent_id)
        self.attach_shared(child_id, self._tables.get(parent_id, []))

    def prepare_write(self, req_id: int, n_tokens_before: int) -> bool:
        """Copy-on-write before a token is written at position n_tokens_before.

        If that position lies inside a block of the table that others share (refcount > 1),
        the request gets a fresh block in its place and drops its reference on the shared one.
        Returns True if a copy happened. NoFreeBlocks (nothing changed) if none is free.
        A position past the table needs no copy: `grow` covers it.
        """
        table = self._tables.get(req_id)
        index = n_tokens_before // self.block_size
        if table is None or index >= len(table):
            return False
        shared_block = table[index]
        if not self._gpu.is_shared(shared_block):
            return False
        (copy,) = self._gpu.allocate(1)
        self._gpu.decref((shared_block,))
        table[index] = copy
        self.n_cow_copies += 1
        return True

    def shrink(self, req_id: int, n_tokens: int) -> int:
        """Give back the blocks of the request's table beyond those covering `n_tokens` tokens (a
        decode run cut short: sim.engine.sched.decode_runs.truncate_run); returns GPU blocks freed."""
        table = self._tables.get(req_id)
        keep = -(-n_tokens // self.block_size)
        if not table or len(table) <= keep:
            return 0
        tail = table[keep:]
        del table[keep:]
        return self._gpu.release(tail[::-1])

    def free_request(self, req_id: int) -> int:
        """Drop the request's references (GPU or CPU) and forget it; returns GPU blocks freed."""
        cpu_blocks = self._swapped.pop(req_id, None)
        if cpu_blocks is not None:
            self._cpu.release_table(cpu_blocks)
        table = self._tables.pop(req_id, None)
        if not table:
            return 0
        return self._gpu.release_table(table)

    # ---- swap -------------------------------------------------------------------------------
    def n_swapped_blocks(self, req_id: int) -> int:
        """How many CPU blocks a swapped-out request holds (what swapping it in needs on GPU)."""
        return len(self._swapped.get(req_id, ()))

    def is_swapped(self, req_id: int) -> bool:
        return req_id in self._swapped

    def swap_out(self, req_id: int) -> int:
        """Move the request's table to private CPU blocks; returns the number of blocks moved.

        GPU references are dropped (shared blocks stay for their other holders).
        NoFreeBlocks (nothing changed) if the CPU is short.
        """
        self._require_resident(req_id)
        table = self._tables.get(req_id, [])
        cpu_blocks = self._cpu.allocate(len(table))
        self._tables.pop(req_id, None)
        self._gpu.release_table(table)
        self._swapped[req_id] = cpu_blocks
        self.n_swapped_out_blocks += len(table)
        return len(table)

    def swap_in(self, req_id: int) -> int:
        """Bring a swapped request back into fresh GPU blocks; returns the number moved.

        NoFreeBlocks (nothing changed) if the GPU is short.
        """
        cpu_blocks = self._swapped.get(req_id)
        if cpu_blocks is None:
            raise RuntimeError(f"request {req_id} is not swapped out")
        gpu_blocks = self._gpu.allocate(len(cpu_blocks))
        del self._swapped[req_id]
        self._cpu.release_table(cpu_blocks)
        self._tables[req_id] = gpu_blocks
        self.n_swapped_in_blocks += len(gpu_blocks)
        return len(gpu_blocks)

    def _require_resident(self, req_id: int) -> None:
        if req_id in self._swapped:
            raise RuntimeError(f"request {req_id} is swapped out; swap it in first")
