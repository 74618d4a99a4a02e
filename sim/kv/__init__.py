"""KV-cache bookkeeping: paged blocks (`blocks`), block keys from trace hash ids (`keys`),
and the radix prefix cache (`radix`)."""

from sim.kv.blocks import BlockManager, NoFreeBlocks

__all__ = ["BlockManager", "NoFreeBlocks"]
