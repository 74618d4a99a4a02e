"""Which decode step takes which KV block: a sequence with c cached tokens is r = (-c) mod B tokens
short of filling its blocks, so it takes a new block at decode steps s = r, r + B, r + 2B, ...
(0-based)."""

from __future__ import annotations


def blocks_taken(residue: int, n_steps: int, block_size: int) -> int:
    """Blocks a sequence `residue` tokens short of a whole block takes over n_steps decode steps."""
    return (n_steps - 1 - residue) // block_size + 1 if n_steps > residue else 0
