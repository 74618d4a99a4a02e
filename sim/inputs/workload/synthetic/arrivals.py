"""Open-loop arrival processes: Poisson, Gamma (burstiness set by the gap CV), constant rate.

Each returns sorted arrival times in seconds for either `n` requests or every arrival in
[0, duration_s). Randomness only from the generator passed in.
"""

from __future__ import annotations

import math

import numpy as np

ARRIVAL_PROCESSES = ("poisson", "gamma", "constant")


def _gaps_s(
    rng: np.random.Generator, process: str, rate_qps: float, cv: float, n: int
) -> np.ndarray:
    if process == "poisson":
        return rng.exponential(1.0 / rate_qps, size=n)
    if process == "gamma":
        shape = 1.0 / cv**2  # a Gamma(k, theta) gap has CV 1/sqrt(k) and mean k*theta
        return rng.gamma(shape, 1.0 / (rate_qps * shape), size=n)
    if process == "constant":
        return np.full(n, 1.0 / rate_qps)
    raise ValueError(f"unknown arrival process {process!r}")


def arrival_times_s(
    rng: np.random.Generator,
    process: str,
    rate_qps: float,
    *,
    cv: float = 1.0,
    n: int | None = None,
    duration_s: float | None = None,
) -> np.ndarray:
    """Arrival times of a renewal process with mean rate `rate_qps` (the first arrival comes
    one gap after 0, except the constant process, which starts at 0). Give exactly one of
    `n` (that many arrivals) or `duration_s` (every arrival before it)."""
    if (n is None) == (duration_s is None):
        raise ValueError("give exactly one of n and duration_s")
    if rate_qps <= 0 or cv <= 0:
        raise ValueError("rate_qps and cv must be > 0")
    if n is not None:
        times = np.cumsum(_gaps_s(rng, process, rate_qps, cv, n))
        return times - times[0] if process == "constant" and n else times
    if process == "constant":
        return np.arange(math.ceil(duration_s * rate_qps - 1e-9)) / rate_qps
    if process == "poisson":  # given the count, Poisson arrivals are sorted uniforms
        count = rng.poisson(rate_qps * duration_s)
        return np.sort(rng.uniform(0.0, duration_s, size=count))
    pieces, end_s = [], 0.0
    batch = int(rate_qps * duration_s * 1.2) + 16
    while end_s < duration_s:
        times = end_s + np.cumsum(_gaps_s(rng, process, rate_qps, cv, batch))
        pieces.append(times)
        end_s = float(times[-1])
    times = np.concatenate(pieces)
    return times[times < duration_s]
