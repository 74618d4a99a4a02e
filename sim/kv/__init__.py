"""KV-cache bookkeeping: paged blocks (`blocks`, their id pools in `block_pool`), block keys from
trace hash ids (`keys`), and the radix prefix cache (`radix`)."""

from sim.kv.block_pool import NoFreeBlocks
from sim.kv.blocks import BlockManager
from sim.kv.keys import block_keys
from sim.kv.radix import PrefixMatch, RadixCache

__all__ = ["BlockManager", "NoFreeBlocks", "PrefixMatch", "RadixCache", "block_keys"]
