"""Which configurations a calibration run times.

`full_grid()` is sized for one H200 in about eight minutes with two 7-8B models; `quick_grid()`
is a smoke run (seconds on a GPU); `cpu_quick_grid()` is what the CPU test suite runs, on
the toy model, within a few seconds. Decode configurations whose KV cache would exceed
`max_kv_tokens` (batch x context) are left out rather than allocated.
"""

from __future__ import annotations

from dataclasses import dataclass, field


def _powers_of_two(low: int, high: int) -> tuple[int, ...]:
    values, value = [], low
    while value <= high:
        values.append(value)
        value *= 2
    return tuple(values)


@dataclass(frozen=True)
class Grid:
    """Axes of the calibration grid. Every tuple is iterated in full (a cross product
    per op), except decode pairs over `max_kv_tokens` and TP sizes a model cannot use."""

    m_tokens: tuple[int, ...]
    tps: tuple[int, ...]
    block_sizes: tuple[int, ...]
    decode_batch_sizes: tuple[int, ...]
    decode_context_lens: tuple[int, ...]
    prefill_batch_sizes: tuple[int, ...]
    prefill_seq_lens: tuple[int, ...]
    allreduce_payloads_bytes: tuple[int, ...]
    max_kv_tokens: int
    n_warmup: int
    n_repeats: int
    rotation_budget_bytes: int = field(default=2 * 2**30)
    max_rotation_copies: int = 32
    # CUDA-graph replay: capture about this much work per replay (eager time x launches), at most
    # max_graph_launches calls (each keeps its output alive in the graph's memory pool)
    graph_replay_target_s: float = 2e-3
    max_graph_launches: int = 32
    # Operand sets larger than this are not timed, one line each (None: no cap; a CPU quick run
    # caps them so a big model's LM head or experts do not take minutes on a CPU)
    max_operand_bytes: int | None = None
    # MoE and MLA models use these TP sizes and M values instead of tps / m_tokens when given (a
    # CPU quick run times such a model at TP 8, where one shard's shapes fit a CPU)
    large_model_tps: tuple[int, ...] | None = None
    large_model_m_tokens: tuple[int, ...] | None = None

    def tps_for(self, is_large: bool) -> tuple[int, ...]:
        return self.large_model_tps if is_large and self.large_model_tps else self.tps

    def m_tokens_for(self, is_large: bool) -> tuple[int, ...]:
        return self.large_model_m_tokens if is_large and self.large_model_m_tokens else self.m_tokens

    def decode_points(self) -> list[tuple[int, int, int]]:
        """(block_size, batch_size, context_len) triples within the KV-token cap."""
        return [
            (block_size, batch_size, context_len)
            for block_size in self.block_sizes
            for batch_size in self.decode_batch_sizes
            for context_len in self.decode_context_lens
            if batch_size * context_len <= self.max_kv_tokens
        ]

    def prefill_points(self) -> list[tuple[int, int]]:
        """(batch_size, seq_len) pairs."""
        return [(b, s) for b in self.prefill_batch_sizes for s in self.prefill_seq_lens]


def full_grid() -> Grid:
    """M = 1..16384, TP 1/2/4/8, every block size, contexts 128..16384, prefill up to 16k tokens."""
    return Grid(
        m_tokens=_powers_of_two(1, 16384) + (3, 24, 96, 384, 1536, 6144),
        tps=(1, 2, 4, 8),
        block_sizes=(8, 16, 32, 64, 128),
        decode_batch_sizes=(1, 8, 32, 128, 256),
        decode_context_lens=(128, 512, 2048, 8192, 16384),
        prefill_batch_sizes=(1, 4),
        prefill_seq_lens=(128, 512, 2048, 8192, 16384),
        allreduce_payloads_bytes=_powers_of_two(2**12, 2**28),
        max_kv_tokens=512 * 1024,
        n_warmup=3,
        n_repeats=15,
    )


def quick_grid() -> Grid:
    """A few points per axis: seconds on a GPU."""
    return Grid(
        m_tokens=(1, 16, 256, 4096),
        tps=(1, 2),
        block_sizes=(16, 128),
        decode_batch_sizes=(1, 32),
        decode_context_lens=(512, 4096),
        prefill_batch_sizes=(1,),
        prefill_seq_lens=(512,),
        allreduce_payloads_bytes=(2**16, 2**24),
        max_kv_tokens=512 * 1024,
        n_warmup=2,
        n_repeats=5,
    )


def cpu_quick_grid() -> Grid:
    """The CPU test-suite grid (toy model dims; MoE and MLA models at TP 8, M 1 and 16, operand
    sets up to 32 MiB): every op class, tiny sizes."""
    return Grid(
        m_tokens=(1, 4, 16, 64, 256, 1024),
        tps=(1, 2),
        block_sizes=(8, 16, 32, 64, 128),
        decode_batch_sizes=(1, 4),
        decode_context_lens=(64, 256),
        prefill_batch_sizes=(1,),
        prefill_seq_lens=(32, 128),
        allreduce_payloads_bytes=(),
        max_kv_tokens=4096,
        n_warmup=1,
        n_repeats=3,
        rotation_budget_bytes=64 * 2**20,
        max_rotation_copies=4,
        max_operand_bytes=32 * 2**20,
        large_model_tps=(8,),
        large_model_m_tokens=(1, 16),
    )
