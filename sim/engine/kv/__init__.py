"""KV-cache bookkeeping: paged blocks (`blocks`, their id pools in `block_pool`), block keys from
trace hash ids (`keys`), and the radix prefix cache (`radix`)."""

from sim.engine.kv.block_pool import NoFreeBlocks
from sim.engine.kv.blocks import BlockManager
from sim.engine.kv.keys import block_keys
from sim.engine.kv.radix import PrefixMatch, RadixCache

__all__ = ["BlockManager", "NoFreeBlocks", "PrefixMatch", "RadixCache", "block_keys"]
