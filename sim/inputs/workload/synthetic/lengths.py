"""Token-count distributions (fixed, uniform, lognormal) and trace-resampled length pairs."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from sim.inputs.workload.spec_models import FixedDist, Lengths, LognormalDist, UniformDist
from sim.schema import MAX_TOKENS


def sample_dist(dist, rng: np.random.Generator, n: int) -> np.ndarray:
    """`n` whole numbers >= 1 from a FixedDist, UniformDist or LognormalDist."""
    if isinstance(dist, FixedDist):
        return np.full(n, dist.value, dtype=np.int64)
    if isinstance(dist, UniformDist):
        return rng.integers(dist.low, dist.high + 1, size=n, dtype=np.int64)
    if isinstance(dist, LognormalDist):
        mu = math.log(dist.mean) - dist.sigma**2 / 2  # so that E[X] = mean
        values = np.rint(rng.lognormal(mu, dist.sigma, size=n))
        upper = dist.max if dist.max is not None else MAX_TOKENS
        return np.clip(values, 1, upper).astype(np.int64)
    raise TypeError(f"not a length distribution: {dist!r}")


def sample_length_pairs(
    lengths: Lengths, rng: np.random.Generator, n: int, base_dir: Path | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(prompt or message tokens, output tokens) for `n` requests. A `trace` source is
    resampled with replacement, pairs kept together; a relative path is tried against
    `base_dir` (the spec's folder) before the bundled names."""
    if lengths.trace is None:
        return sample_dist(lengths.prompt, rng, n), sample_dist(lengths.output, rng, n)
    from sim.inputs.workload.read_trace import load_trace  # read_trace imports synthetic.arrivals

    source = lengths.trace
    if base_dir is not None and (base_dir / source).is_file():
        source = str(base_dir / source)
    trace = load_trace(source)
    rows = rng.integers(0, len(trace), size=n)
    return trace.prompt_tokens[rows], trace.output_tokens[rows]
