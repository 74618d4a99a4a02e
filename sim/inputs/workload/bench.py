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
from sim.inputs.budget import MAX_TIME_S, MAX_TOTAL_TOKENS, require
from sim.inputs.workload.trace import ClosedLoop, Trace
from sim.numbers import strict_number
from sim.schema import MAX_REQUESTS, MAX_SEED_EXCLUSIVE, MAX_TOKENS

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
    """`key=value,...` as {key: number}: each key once, each value strictly checked (whole counts
    within sim.schema's limits, finite non-negative times, a seed in [0, 2**63)); InputError
    naming --bench and the key otherwise."""
    values: dict = {}
    for item in [part.strip() for part in text.split(",") if part.strip()]:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or key not in KEYS:
            raise InputError("--bench", key or item, f"items are key=value with keys {', '.join(KEYS)}")
        if key in values:
            raise InputError("--bench", key, "given twice; give each key once")
        values[key] = strict_number(raw, "--bench", key, **_LIMITS[key])
    return values


_LIMITS = {
    "batch": dict(whole=True, low=1, high=MAX_REQUESTS), "requests": dict(whole=True, low=1, high=MAX_REQUESTS),
    "concurrency": dict(whole=True, low=1, high=MAX_REQUESTS), "isl": dict(whole=True, low=1, high=MAX_TOKENS),
    "osl": dict(whole=True, low=1, high=MAX_TOKENS), "think_s": dict(low=0.0, high=MAX_TIME_S),
    "think_cv": dict(low=0.0, high=1e3), "jitter": dict(low=0.0, high=1.0),
    "seed": dict(whole=True, low=0, high=MAX_SEED_EXCLUSIVE - 1),
}


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
    if "concurrency" not in v and ("think_s" in v or "think_cv" in v):
        raise InputError("--bench", None, "think_s/think_cv need concurrency=C (a closed loop)")
    jitter = v.get("jitter", 0.0)
    if jitter == 1.0:
        raise InputError("--bench", "jitter", "must be in [0, 1) (got 1)")
    for key in ("isl", "osl"):
        if v[key] * (1 + jitter) > MAX_TOKENS:
            raise InputError("--bench", key, f"{key} x (1 + jitter) must be at most {MAX_TOKENS:,} tokens")
    count = "batch" if "batch" in v else "requests"
    require(v[count] * (v["isl"] + v["osl"]) * (1 + jitter), MAX_TOTAL_TOKENS, "tokens", f"{count} x "
            "(isl + osl)", "--bench")
    n = v.get("batch", v.get("requests"))
    seed = v.get("seed", 0)
    trace = Trace(np.zeros(n), np.full(n, v["isl"]), np.full(n, v["osl"]), source=f"bench {text}")
    length_seed, think_seed = np.random.SeedSequence([seed, 11]).generate_state(2)
    trace = jitter_lengths(trace, jitter, np.random.default_rng(length_seed))
    if "concurrency" in v:
        return ClosedLoop(trace, v["concurrency"], v.get("think_s", 0.0), v.get("think_cv", 0.0), int(think_seed))
    return trace
