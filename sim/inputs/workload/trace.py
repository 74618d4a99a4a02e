"""The columnar request trace every loader produces and the engine replays.

A `Trace` holds one row per request in numpy arrays (struct of arrays), sorted by
arrival time. Prefix structure, when the source has it, is a ragged array of hash ids:
`hash_ids_flat[hash_offsets[i]:hash_offsets[i+1]]` are request i's ids, each id covering
`hash_block_tokens` consecutive prompt tokens (Mooncake: 512, Qwen-Bailian: 16).
Two requests share a prompt prefix exactly as far as their id lists share a prefix.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Trace:
    arrival_s: np.ndarray  # float64, non-decreasing, seconds from trace start
    prompt_tokens: np.ndarray  # int64 >= 1
    output_tokens: np.ndarray  # int64 >= 1
    n_samples: np.ndarray | None = None  # int64 >= 1 (parallel sampling n); None means all 1
    hash_ids_flat: np.ndarray | None = None  # int64 (int32 when a generator's ids fit)
    hash_offsets: np.ndarray | None = None  # int64, len = n_requests + 1
    hash_block_tokens: int | None = None
    source: str = ""  # where it came from, for reports
    extra: dict = field(default_factory=dict)  # optional per-request columns (session_id, turn...)
    # the content hash when it is not this object's own: set by `without_prefix_ids` (sim.run.provenance)
    content_sha256: str | None = None
    # a longer draw of the same workload (n requests -> Trace), where it came from a generator: a spec's
    # synthetic process can be run longer with fresh arrivals (sim.inputs.workload.transforms.extend)
    redraw: Callable[[int], Trace] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.arrival_s = np.asarray(self.arrival_s, dtype=np.float64)
        self.prompt_tokens = np.asarray(self.prompt_tokens, dtype=np.int64)
        self.output_tokens = np.asarray(self.output_tokens, dtype=np.int64)
        if self.n_samples is not None:
            self.n_samples = np.asarray(self.n_samples, dtype=np.int64)
        if (self.hash_ids_flat is None) != (self.hash_offsets is None):
            raise ValueError("hash_ids_flat and hash_offsets come together")

    def __len__(self) -> int:
        return int(self.arrival_s.shape[0])

    @property
    def has_hash_ids(self) -> bool:
        return self.hash_ids_flat is not None

    def hash_ids(self, i: int) -> np.ndarray:
        """Request i's prefix hash ids (empty when the trace has none)."""
        if self.hash_offsets is None:
            return np.empty(0, dtype=np.int64)
        return self.hash_ids_flat[self.hash_offsets[i] : self.hash_offsets[i + 1]]

    def samples(self) -> np.ndarray:
        if self.n_samples is None:
            return np.ones(len(self), dtype=np.int64)
        return self.n_samples

    def without_prefix_ids(self, content_sha256: str) -> Trace:
        """The same requests (arrays shared) without prefix hash ids, for a run that never reads them;
        `content_sha256` (this trace's, ids included) still identifies the workload."""
        return Trace(self.arrival_s, self.prompt_tokens, self.output_tokens, self.n_samples, source=self.source,
                     extra=self.extra, content_sha256=content_sha256)

    def take(self, index, hash_ids: bool = True) -> Trace:
        """A new trace with the rows in `index` (in that order), hash ids carried along (unless
        `hash_ids` is False): the ragged ids are gathered in vectorized chunks, so it scales to
        million-row traces. A contiguous run of rows (a cut) shares the hash ids of this trace
        rather than copying."""
        index = np.asarray(index, dtype=np.int64)
        flat = offsets = None
        if self.hash_offsets is not None and hash_ids:
            flat, offsets = self._take_hash_ids(index)
        return Trace(
            arrival_s=self.arrival_s[index],
            prompt_tokens=self.prompt_tokens[index],
            output_tokens=self.output_tokens[index],
            n_samples=None if self.n_samples is None else self.n_samples[index],
            hash_ids_flat=flat,
            hash_offsets=offsets,
            hash_block_tokens=self.hash_block_tokens,
            source=self.source,
            extra={key: np.asarray(values)[index] for key, values in self.extra.items()},
        )

    def _take_hash_ids(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        starts = self.hash_offsets[index]
        lengths = self.hash_offsets[index + 1] - starts
        offsets = np.zeros(index.shape[0] + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        if index.shape[0] and index[-1] - index[0] == index.shape[0] - 1 and (np.diff(index) == 1).all():
            return self.hash_ids_flat[starts[0] : starts[0] + offsets[-1]], offsets
        flat = np.empty(offsets[-1], dtype=self.hash_ids_flat.dtype)
        row = 0
        while row < index.shape[0]:  # a chunk of rows at a time: temporaries stay bounded
            stop = max(int(np.searchsorted(offsets, offsets[row] + TAKE_IDS_PER_CHUNK, side="right")) - 1, row + 1)
            stop = min(stop, index.shape[0])
            part = slice(row, stop)
            n_ids = int(offsets[stop] - offsets[row])
            gather = np.repeat(starts[part] - (offsets[part] - offsets[row]), lengths[part]) + np.arange(n_ids)
            flat[offsets[row] : offsets[stop]] = self.hash_ids_flat[gather]
            row = stop
        return flat, offsets


TAKE_IDS_PER_CHUNK = 1 << 20  # hash ids gathered per chunk of rows


@dataclass
class ClosedLoop:
    """A closed-loop workload: `concurrency` clients, each sending its next request when
    its previous one finishes (plus a think time of mean `think_time_s`: fixed when
    `think_time_cv` is 0, else Gamma-distributed with that coefficient of variation, drawn from
    `seed`, so identical clients do not march in lockstep). Requests are drawn in order from
    `pool`; its arrival times are ignored. The engine stamps the real arrival times."""

    pool: Trace
    concurrency: int
    think_time_s: float = 0.0
    think_time_cv: float = 0.0
    seed: int = 0

    def think_times_s(self, rng) -> float:
        """One client's next think time (seconds)."""
        if self.think_time_s <= 0 or self.think_time_cv <= 0:
            return self.think_time_s
        shape = 1.0 / self.think_time_cv**2
        return float(rng.gamma(shape, self.think_time_s / shape))
