"""Benchmark-style workloads in one short spec, and closed loops with seeded jitter.

`--bench` specs (comma-separated key=value):
- `batch=8,isl=32,osl=128`: a fixed batch of 8 identical requests sent together (vLLM's latency test)
- `requests=1000,isl=128,osl=128`: 1000 requests at infinite rate, all queued at t=0
  (trtllm-bench throughput, `vllm bench serve --request-rate inf`)
- `requests=640,concurrency=32,isl=1024,osl=128`: 32 clients in a closed loop
  (`vllm bench serve --max-concurrency 32`); with `think_s` (mean think time), `think_cv`
  (its coefficient of variation, Gamma), `jitter` (lengths scaled by a uniform factor in
  [1-j, 1+j]) and `seed`.
"""

from __future__ import annotations

import numpy as np

from sim.errors import InputError
from sim.trace import ClosedLoop, Trace

KEYS = ("batch", "requests", "concurrency", "isl", "osl", "think_s", "think_cv", "jitter", "seed")


def jitter_lengths(trace: Trace, fraction: float, rng: np.random.Generator) -> Trace:
    """Prompt and output lengths each scaled by an independent uniform factor in [1-f, 1+f]
    (rounded, at least 1 token). Returns a new trace; `fraction` 0 returns `trace` itself."""
    if fraction <= 0:
        return trace
    n = len(trace)
    out = trace.take(np.arange(n))
    out.prompt_tokens = np.maximum(1, np.rint(trace.prompt_tokens * rng.uniform(1 - fraction, 1 + fraction, n)))
    out.output_tokens = np.maximum(1, np.rint(trace.output_tokens * rng.uniform(1 - fraction, 1 + fraction, n)))
    out.prompt_tokens = out.prompt_tokens.astype(np.int64)
    out.output_tokens = out.output_tokens.astype(np.int64)
    return out


def closed_loop(pool: Trace, arrival, seed: int) -> ClosedLoop:
    """A ClosedLoop from a spec's `closed_loop` arrival (concurrency, think time and its CV,
    length jitter), seeded from the spec's seed (its own stream, apart from the lengths')."""
    length_seed, think_seed = np.random.SeedSequence([seed, 11]).generate_state(2)
    pool = jitter_lengths(pool, getattr(arrival, "length_jitter", 0.0), np.random.default_rng(length_seed))
    return ClosedLoop(pool, arrival.concurrency, arrival.think_time_s, getattr(arrival, "think_time_cv", 0.0),
                      int(think_seed))


def parse_bench_spec(text: str) -> dict:
    values: dict = {}
    for item in [part.strip() for part in text.split(",") if part.strip()]:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or key not in KEYS:
            raise InputError("--bench", key or item, f"items are key=value with keys {', '.join(KEYS)}")
        try:
            values[key] = float(raw) if key in ("think_s", "think_cv", "jitter") else int(raw)
        except ValueError:
            raise InputError("--bench", key, f"must be a number (got {raw!r})") from None
    return values


def bench_workload(text: str) -> Trace | ClosedLoop:
    """The workload a `--bench` spec describes (see the module docstring)."""
    v = parse_bench_spec(text)
    if ("batch" in v) == ("requests" in v):
        raise InputError("--bench", None, "give exactly one of batch=N (a fixed batch) or requests=N")
    if "batch" in v and any(k in v for k in ("concurrency", "think_s", "think_cv")):
        raise InputError("--bench", None, "a fixed batch has no concurrency or think time (use requests=N)")
    for key in ("isl", "osl"):
        if key not in v:
            raise InputError("--bench", key, "required (tokens per request)")
    for key in ("batch", "requests", "concurrency", "isl", "osl"):
        if key in v and v[key] < 1:
            raise InputError("--bench", key, f"must be >= 1 (got {v[key]})")
    for key in ("think_s", "think_cv"):
        if v.get(key, 0.0) < 0:
            raise InputError("--bench", key, f"must be >= 0 (got {v[key]})")
    if not 0 <= v.get("jitter", 0.0) < 1:
        raise InputError("--bench", "jitter", f"must be in [0, 1) (got {v['jitter']})")
    n = v.get("batch", v.get("requests"))
    seed = v.get("seed", 0)
    trace = Trace(np.zeros(n), np.full(n, v["isl"]), np.full(n, v["osl"]), source=f"bench {text}")
    length_seed, think_seed = np.random.SeedSequence([seed, 11]).generate_state(2)
    trace = jitter_lengths(trace, v.get("jitter", 0.0), np.random.default_rng(length_seed))
    if "concurrency" in v:
        return ClosedLoop(trace, v["concurrency"], v.get("think_s", 0.0), v.get("think_cv", 0.0), int(think_seed))
    if "think_s" in v or "think_cv" in v:
        raise InputError("--bench", None, "think_s/think_cv need concurrency=C (a closed loop)")
    return trace
