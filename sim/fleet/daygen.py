"""Long shaped workloads (`kind: day` specs): tenants, each a rate profile and a length mix,
generated lazily one chunk of simulated time at a time, so a day of 10^7 requests never exists
in memory at once.

Arrivals are a non-homogeneous Poisson process: in each 1 s slice the count is Poisson with mean
rate(slice midpoint) x 1 s, the times uniform within the slice. Chunk k of tenant j draws from
`default_rng([seed, j, k])`: any chunk can be regenerated alone and the same spec and seed give
the same day, bit for bit, however it is consumed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import Field

from sim.errors import InputError
from sim.fleet.profile import WEEK_S, RateProfile, Rates, TraceShapeRate, trace_shape_series
from sim.inputs.workload.spec_models import Lengths, Seed
from sim.schema import Plausible, StrictModel

MAX_DAY_REQUESTS = 2_000_000_000
SLICE_S = 1.0


class Tenant(StrictModel):
    """One source of traffic: its rate over the day and its request lengths (distributions, or
    (prompt, output) pairs resampled from a trace: a bundled name such as `splitwise_conv`)."""

    name: str = "default"
    rate: RateProfile
    lengths: Lengths


class DayWorkload(StrictModel):
    """A day (or week) of traffic: the sum of its tenants' arrivals over `duration_s`."""

    kind: Literal["day"]
    duration_s: float = Field(gt=0, le=4 * WEEK_S)
    seed: Seed = 0
    chunk_s: Plausible("chunk_s") = 300.0
    tenants: Annotated[list[Tenant], Field(min_length=1, max_length=64)]


@dataclass
class Chunk:
    """Arrivals of [start_s, end_s), in time order."""

    start_s: float
    end_s: float
    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    tenant: np.ndarray  # int16 index into the workload's tenants


class DayGenerator:
    """A DayWorkload ready to generate (its traces loaded once). `offset_s` (a whole number of
    chunks): a window of a longer day, its t = 0 at the day's `offset_s`; its chunks are the day's
    own (the same draws, times shifted), its duration the spec's (sim.fleet.plan screens windows)."""

    def __init__(self, spec: DayWorkload, base_dir: Path | None = None, where: str = "day spec",
                 offset_s: float = 0.0):
        self.spec, self.base_dir, self.where = spec, base_dir, where
        self.offset_s, self._chunk0 = offset_s, round(offset_s / spec.chunk_s)
        if offset_s < 0 or self._chunk0 * spec.chunk_s != offset_s:
            raise ValueError(f"offset_s must be a whole number of chunks (chunk_s = {spec.chunk_s:g}); got {offset_s}")
        self.rates = [Rates(t.rate, self._series(t.rate)) for t in spec.tenants]
        self._pairs = [self._length_pairs(t.lengths) for t in spec.tenants]
        expected = self.expected_requests()
        if expected > MAX_DAY_REQUESTS:
            raise InputError(where, "tenants", f"expect at most {MAX_DAY_REQUESTS:,} requests; got {expected:,.0f}")

    def _series(self, profile: RateProfile) -> np.ndarray | None:
        return trace_shape_series(profile.base, self.base_dir) if isinstance(profile.base, TraceShapeRate) else None

    def _length_pairs(self, lengths: Lengths):
        if lengths.trace is None:
            return None
        from sim.inputs.workload.read_trace import load_trace

        source = lengths.trace
        if self.base_dir is not None and (self.base_dir / source).is_file():
            source = str(self.base_dir / source)
        trace = load_trace(source)
        return trace.prompt_tokens.astype(np.int64), trace.output_tokens.astype(np.int64)

    def rate_rps(self, t_s) -> np.ndarray:
        """The expected total rate (all tenants) at `t_s`."""
        if self.offset_s:
            t_s = np.asarray(t_s) + self.offset_s
        return sum(r.rate_rps(t_s) for r in self.rates)

    def expected_requests(self, start_s: float = 0.0, end_s: float | None = None) -> float:
        end_s = self.spec.duration_s if end_s is None else end_s
        shift = self.offset_s
        return sum(r.mean_rate_rps(start_s + shift, end_s + shift) for r in self.rates) * (end_s - start_s)

    def chunks(self) -> Iterator[Chunk]:
        duration_s, chunk_s = self.spec.duration_s, self.spec.chunk_s
        for index in range(int(np.ceil(duration_s / chunk_s))):
            yield self.chunk(index)

    def chunk(self, index: int) -> Chunk:
        """Chunk `index`: [index x chunk_s, (index + 1) x chunk_s) cut at the day's end."""
        start_s = index * self.spec.chunk_s
        end_s = min(start_s + self.spec.chunk_s, self.spec.duration_s)
        shift = self.offset_s
        parts = [self._tenant_chunk(j, index + self._chunk0, start_s + shift, end_s + shift)
                 for j in range(len(self.rates))]
        arrival_s = np.concatenate([p[0] for p in parts])
        if shift:
            arrival_s -= shift
        order = np.argsort(arrival_s, kind="stable")
        return Chunk(start_s, end_s, arrival_s[order], np.concatenate([p[1] for p in parts])[order],
                     np.concatenate([p[2] for p in parts])[order],
                     np.concatenate([np.full(p[0].shape[0], j, dtype=np.int16) for j, p in enumerate(parts)])[order])

    def _tenant_chunk(self, tenant: int, index: int, start_s: float, end_s: float):
        rng = np.random.default_rng([self.spec.seed, tenant, index])
        edges = np.arange(start_s, end_s, SLICE_S)
        widths = np.minimum(edges + SLICE_S, end_s) - edges
        counts = rng.poisson(self.rates[tenant].rate_rps(edges + widths / 2) * widths)
        n = int(counts.sum())
        arrival_s = np.sort(np.repeat(edges, counts) + rng.random(n) * np.repeat(widths, counts))
        lengths, pairs = self.spec.tenants[tenant].lengths, self._pairs[tenant]
        if pairs is None:
            from sim.inputs.workload.synthetic.lengths import sample_dist

            prompt, output = sample_dist(lengths.prompt, rng, n), sample_dist(lengths.output, rng, n)
        else:
            rows = rng.integers(0, pairs[0].shape[0], size=n)
            prompt, output = pairs[0][rows], pairs[1][rows]
        return arrival_s, prompt, output


def load_day_workload(data: dict, where: str, base_dir: Path | None = None) -> DayGenerator:
    from sim.yamlio import validate

    return DayGenerator(validate(DayWorkload, data, where), base_dir, where)
