"""KV-cache bookkeeping: paged blocks (`blocks`), block keys from trace hash ids (`keys`),
and the radix prefix cache (`radix`)."""

from sim.kv.blocks import BlockManager, NoFreeBlocks
from sim.kv.keys import block_keys
from sim.kv.radix import PrefixMatch, RadixCache

__all__ = ["BlockManager", "NoFreeBlocks", "PrefixMatch", "RadixCache", "block_keys"]
