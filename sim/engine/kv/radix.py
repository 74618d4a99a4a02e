"""Radix prefix cache over block-key chains (RadixAttention-style), written for the simulator.

Each node is a compressed edge: a run of block keys (numpy int64) and the KV block holding
each. A path from the root spells a chain of keys, i.e. a prompt prefix in whole blocks.
Children are found by their first key. A match or insert that stops inside an edge splits it.

References: the tree holds ONE BlockManager reference on every block it stores. A running
request that uses cached blocks holds its own (so such a block has refcount 2) and locks the
deepest node it uses; a lock counts on every node up to the root, and locked nodes are never
evicted. Unlocked blocks count as evictable; evicting one frees it in the BlockManager unless
a request still holds it without a lock (engines should lock what they use).

LRU uses SIMULATED time. Only unlocked leaves are eviction candidates; they sit in a heap
keyed by (last access, node creation order). Access times are not pushed on every touch:
a popped entry whose time is stale is pushed again with the node's current time, so the
heap stays small and each pop is O(log n). Eviction trims a leaf from its tail; an emptied
leaf is removed and its parent may become a candidate.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from sim.engine.kv.blocks import BlockManager


class _Node:
    __slots__ = (
        "alive", "blocks", "children", "first_key", "in_heap",
        "keys", "last_access_s", "lock_ref", "order", "parent",
    )  # fmt: skip

    def __init__(self, keys, blocks, parent, lock_ref, last_access_s, order):
        self.keys: np.ndarray = keys
        self.blocks: list[int] = blocks
        self.first_key: int | None = int(keys[0]) if keys.shape[0] else None
        self.children: dict[int, _Node] = {}
        self.parent: _Node | None = parent
        self.lock_ref = lock_ref
        self.last_access_s = last_access_s
        self.order = order
        self.alive = True
        self.in_heap = False


@dataclass
class PrefixMatch:
    blocks: list[int]  # the cached blocks of the matched prefix, in order
    node: object  # the deepest matched node (lock this one); the root when nothing matched

    @property
    def n_blocks(self) -> int:
        return len(self.blocks)


def _common_prefix_len(edge: np.ndarray, keys: np.ndarray) -> int:
    n = min(edge.shape[0], keys.shape[0])
    equal = edge[:n] == keys[:n]
    first_mismatch = int(equal.argmin())
    return n if equal[first_mismatch] else first_mismatch


class RadixCache:
    """Prefix cache of one replica, over the blocks of its BlockManager."""

    on_evict = None  # hook (host-memory tier): callback(path keys root..node, n tail blocks) before a trim
    on_drop_blocks = None  # hook (hybrid models' window companions): callback(evicted block ids)

    def __init__(self, blocks: BlockManager):
        self._blocks = blocks
        self._n_nodes_created = 0
        self._root = self._new_node(np.empty(0, dtype=np.int64), [], None, 0.0)
        self._heap: list[tuple[float, int, _Node]] = []
        self.n_cached_blocks = 0
        self.n_evictable_blocks = 0
        self.n_evicted_blocks = 0

    def cached_prefix_blocks(self, keys: np.ndarray) -> int:
        """How many leading blocks of `keys` the tree holds. Read-only: no split, no LRU touch
        (for routing and ordering decisions, which are not uses of the cache)."""
        keys = np.asarray(keys, dtype=np.int64)
        node, n_matched, n_keys = self._root, 0, keys.shape[0]
        while n_matched < n_keys:
            child = node.children.get(int(keys[n_matched]))
            if child is None:
                break
            n_common = _common_prefix_len(child.keys, keys[n_matched:])
            n_matched += n_common
            if n_common < child.keys.shape[0]:
                break
            node = child
        return n_matched

    def match_prefix(self, keys: np.ndarray, now_s: float) -> PrefixMatch:
        """Longest cached prefix of `keys`.

        Mutates: last-access time (simulated, `now_s`) of every node on the matched path;
        splits the last node when the match ends inside it, so the returned node covers
        exactly the matched prefix. Takes no references and no locks: a caller that keeps
        the blocks increfs them (BlockManager.attach_shared) and locks `node`.
        """
        keys = np.asarray(keys, dtype=np.int64)
        node, n_matched, blocks = self._root, 0, []
        n_keys = keys.shape[0]
        while n_matched < n_keys:
            child = node.children.get(int(keys[n_matched]))
            if child is None:
                break
            n_common = _common_prefix_len(child.keys, keys[n_matched:])
            if n_common < child.keys.shape[0]:
                child = self._split(child, n_common)
            self._touch(child, now_s)
            blocks.extend(child.blocks)
            node, n_matched = child, n_matched + n_common
        return PrefixMatch(blocks=blocks, node=node)

    def insert(self, keys: np.ndarray, blocks: list[int], now_s: float) -> int:
        """Store the chain `keys` whose KV sits in `blocks[:len(keys)]`.

        Keys already cached keep the tree's block (the caller's block stays the caller's);
        for the new tail the tree increfs the caller's blocks. Returns the number of newly
        cached blocks.
        """
        keys = np.asarray(keys, dtype=np.int64)
        n_keys = keys.shape[0]
        if len(blocks) < n_keys:
            raise ValueError(f"{n_keys} keys but only {len(blocks)} blocks")
        node, n_matched = self._root, 0
        while n_matched < n_keys:
            child = node.children.get(int(keys[n_matched]))
            if child is None:
                return self._add_leaf(node, keys[n_matched:], blocks[n_matched:n_keys], now_s)
            n_common = _common_prefix_len(child.keys, keys[n_matched:])
            if n_common < child.keys.shape[0]:
                child = self._split(child, n_common)
            self._touch(child, now_s)
            node, n_matched = child, n_matched + n_common
        return 0

    def lock(self, node) -> None:
        """Pin `node` and its ancestors against eviction (counted; pair with unlock)."""
        if not node.alive:
            raise RuntimeError("lock of a node that was evicted")
        while node is not self._root:
            if node.lock_ref == 0:
                self.n_evictable_blocks -= len(node.blocks)
            node.lock_ref += 1
            node = node.parent

    def unlock(self, node) -> None:
        while node is not self._root:
            if node.lock_ref <= 0:
                raise RuntimeError("unlock of a node that is not locked")
            node.lock_ref -= 1
            if node.lock_ref == 0:
                self.n_evictable_blocks += len(node.blocks)
                if not node.children:
                    self._push(node)
            node = node.parent

    def evict(self, n_blocks: int) -> int:
        """Free up to `n_blocks` GPU blocks by dropping least-recently-used unlocked leaves.

        Picks the unlocked leaf with the oldest simulated access time (ties: older node
        first), removes blocks from its tail (decref'ing each), removes the leaf once empty
        (its parent may then become a candidate), and repeats. Returns how many blocks
        became free in the BlockManager; fewer than asked only when nothing evictable is left.
        """
        n_freed, heap = 0, self._heap
        while n_freed < n_blocks and heap:
            queued_s, _, node = heapq.heappop(heap)
            node.in_heap = False
            if not (node.alive and not node.children and node.lock_ref == 0):
                continue  # stale entry: locked, grew children or already gone
            if queued_s < node.last_access_s:
                self._push(node)  # touched since queued: requeue at its real time
                continue
            n_freed += self._trim_tail(node, n_blocks - n_freed)
            if node.blocks:
                self._push(node)
            else:
                self._remove_leaf(node)
        return n_freed

    # ---- internals --------------------------------------------------------------------------
    def _new_node(self, keys, blocks, parent, now_s, lock_ref=0) -> _Node:
        self._n_nodes_created += 1
        return _Node(keys, blocks, parent, lock_ref, now_s, self._n_nodes_created)

    def _touch(self, node: _Node, now_s: float) -> None:
        """Refresh the access time; never moves it back (keeps heap entries lower bounds)."""
        node.last_access_s = max(node.last_access_s, now_s)

    def _push(self, node: _Node) -> None:
        if not node.in_heap:
            heapq.heappush(self._heap, (node.last_access_s, node.order, node))
            node.in_heap = True

    def _add_leaf(self, parent: _Node, keys: np.ndarray, blocks: list[int], now_s) -> int:
        own_blocks = list(blocks)
        self._blocks.incref(own_blocks)
        leaf = self._new_node(np.array(keys, dtype=np.int64), own_blocks, parent, now_s)
        parent.children[leaf.first_key] = leaf
        self.n_cached_blocks += len(own_blocks)
        self.n_evictable_blocks += len(own_blocks)
        self._push(leaf)
        return len(own_blocks)

    def _split(self, node: _Node, n_top: int) -> _Node:
        """Cut `node` after n_top keys; returns the new upper node (same lock and time)."""
        parent = node.parent
        top = self._new_node(
            node.keys[:n_top], node.blocks[:n_top], parent, node.last_access_s, node.lock_ref
        )
        parent.children[top.first_key] = top
        node.keys, node.blocks = node.keys[n_top:], node.blocks[n_top:]
        node.first_key = int(node.keys[0])
        node.parent = top
        top.children[node.first_key] = node
        return top

    def _trim_tail(self, node: _Node, n_wanted_free: int) -> int:
        """Drop blocks from the node's tail until n_wanted_free became free or it is empty."""
        n_freed = 0
        while node.blocks and n_freed < n_wanted_free:
            n_take = min(len(node.blocks), n_wanted_free - n_freed)
            if self.on_evict is not None:
                self.on_evict(self._path_keys(node), n_take)
            tail = node.blocks[-n_take:]
            if self.on_drop_blocks is not None:
                self.on_drop_blocks(tail)
            del node.blocks[-n_take:]
            n_freed += self._blocks.decref(reversed(tail))
            self.n_cached_blocks -= n_take
            self.n_evictable_blocks -= n_take
            self.n_evicted_blocks += n_take
        node.keys = node.keys[: len(node.blocks)]
        return n_freed

    def _path_keys(self, node: _Node) -> np.ndarray:
        """The chain of keys from the root down to `node`'s last block still held."""
        parts = [node.keys[: len(node.blocks)]]
        node = node.parent
        while node is not self._root:
            parts.append(node.keys)
            node = node.parent
        return np.concatenate(parts[::-1]) if parts else np.empty(0, dtype=np.int64)

    def _remove_leaf(self, node: _Node) -> None:
        parent = node.parent
        del parent.children[node.first_key]
        node.alive = False
        node.parent = None
        if parent is not self._root and not parent.children and parent.lock_ref == 0:
            self._push(parent)
