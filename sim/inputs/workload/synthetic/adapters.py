"""Which LoRA adapter each synthetic request names (spec `synthetic.adapters`, docs/lora.md).

Columns of `Trace.extra`: `adapter` (int64, 0-based adapter id; -1: the base model alone) and
`adapter_rank` (int64, that adapter's LoRA rank; 0 for base-model requests)."""

from __future__ import annotations

import numpy as np

ADAPTER_STREAM = 0x10A  # seed-sequence child index of the adapter draws (apart from the six other streams)


def adapter_rng(seed: int) -> np.random.Generator:
    """The adapter draws' own generator, so a spec without adapters draws exactly as before."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(ADAPTER_STREAM,)))


def popularity_weights(spec) -> np.ndarray:
    """Probability of each adapter: k^-zipf_s for adapter k = 1..N (zipf), or 1/N (uniform)."""
    if spec.popularity == "uniform":
        return np.full(spec.n_adapters, 1.0 / spec.n_adapters)
    weights = np.arange(1, spec.n_adapters + 1, dtype=np.float64) ** -spec.zipf_s
    return weights / weights.sum()


def adapter_columns(spec, session_of: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """`adapter` and `adapter_rank` per request: one draw per session (a conversation keeps its adapter)."""
    n_sessions = int(session_of.max()) + 1 if session_of.size else 0
    chosen = rng.choice(spec.n_adapters, size=n_sessions, p=popularity_weights(spec)).astype(np.int64)
    if spec.base_share > 0:
        chosen[rng.random(n_sessions) < spec.base_share] = -1
    ranks = np.array([spec.rank_of(k) for k in range(spec.n_adapters)] + [0], dtype=np.int64)
    adapter = chosen[session_of]
    return {"adapter": adapter, "adapter_rank": ranks[adapter]}  # index -1: the trailing 0 rank
