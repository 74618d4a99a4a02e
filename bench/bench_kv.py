"""Speed of the KV bookkeeping: block pool, block-table growth, radix prefix cache.

Run: `python bench/bench_kv.py [--mooncake PATH]`. Prints one table row per measurement.

The radix rows replay a Mooncake-conversation-shaped workload: 12,031 requests whose
512-token hash ids map onto 16-token blocks (~750 blocks per prompt). Without `--mooncake`
the chains are synthesized (conversation sessions that extend earlier turns, all starting
with the shared system id 0; ~790 blocks per prompt, ~37% of prompt blocks reusable by an
infinite cache, ~6.0M distinct blocks, close to the real trace's 752 / ~37% / 5.85M); with
it, the real JSONL's hash ids are used. Each request does
what the radix policy does on admission and completion: keys, match, allocate the unmatched
blocks (evicting when short), insert, drop its own references.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
from sim.engine.kv import BlockManager, RadixCache, block_keys

HASH_BLOCK_TOKENS, BLOCK_SIZE = 512, 16


def bench_alloc_free(n_pairs: int) -> tuple[float, str]:
    bm = BlockManager(n_blocks=1024, block_size=BLOCK_SIZE)
    start = time.perf_counter()
    for _ in range(n_pairs):
        bm.decref(bm.allocate(1))
    return time.perf_counter() - start, f"{n_pairs:,} allocate(1)+decref pairs"


def bench_grow(n_blocks: int, n_requests: int) -> tuple[float, str]:
    bm = BlockManager(n_blocks=n_blocks, block_size=BLOCK_SIZE)
    blocks_per_request = n_blocks // n_requests
    start = time.perf_counter()
    for step in range(1, blocks_per_request + 1):
        n_tokens = step * BLOCK_SIZE
        for req in range(n_requests):
            bm.grow(req, n_tokens)
    elapsed = time.perf_counter() - start
    assert bm.n_free == n_blocks - blocks_per_request * n_requests
    start = time.perf_counter()
    for req in range(n_requests):
        bm.free_request(req)
    freeing = time.perf_counter() - start
    what = (
        f"{blocks_per_request * n_requests:,} grow(+1 block) on a {n_blocks:,}-block manager "
        f"({n_requests:,} tables); free_request all: {freeing:.2f} s"
    )
    return elapsed, what


def synthetic_conversations(rng: np.random.Generator, n_requests: int):
    """(hash ids, prompt tokens) per request: sessions that grow turn by turn."""
    sessions: list[np.ndarray] = []
    next_id, out = 1, []
    for _ in range(n_requests):
        if sessions and rng.random() < 0.35:  # shape tuned to the real trace (see docstring)
            index = int(rng.integers(len(sessions)))
            n_new = 1 + int(rng.geometric(1 / 6))
            ids = np.concatenate([sessions[index], np.arange(next_id, next_id + n_new)])
            sessions[index] = ids
        else:
            n_new = 1 + int(rng.exponential(20))
            ids = np.concatenate([[0], np.arange(next_id, next_id + n_new)])
            sessions.append(ids)
        next_id += n_new
        ids = ids[:247].astype(np.int64)
        prompt_tokens = (len(ids) - 1) * HASH_BLOCK_TOKENS + int(rng.integers(1, 513))
        out.append((ids, prompt_tokens))
    return out


def mooncake_requests(path: str):
    with open(path) as trace:
        rows = [json.loads(line) for line in trace]
    return [(np.array(r["hash_ids"], dtype=np.int64), int(r["input_length"])) for r in rows]


def bench_radix(requests, n_blocks: int) -> tuple[float, str]:
    bm = BlockManager(n_blocks=n_blocks, block_size=BLOCK_SIZE)
    cache = RadixCache(bm)
    n_hit_blocks = n_prompt_blocks = 0
    timings = dict.fromkeys(("keys", "match", "alloc+evict", "insert+decref"), 0.0)
    for now_s, (ids, prompt_tokens) in enumerate(requests):
        t0 = time.perf_counter()
        keys = block_keys(ids, HASH_BLOCK_TOKENS, prompt_tokens, BLOCK_SIZE)
        t1 = time.perf_counter()
        match = cache.match_prefix(keys, float(now_s))
        t2 = time.perf_counter()
        n_new = len(keys) - match.n_blocks
        if not bm.can_allocate(n_new):
            cache.evict(n_new - bm.n_free)
        own = bm.allocate(n_new)
        t3 = time.perf_counter()
        cache.insert(keys, match.blocks + own, float(now_s))
        bm.decref(own)
        t4 = time.perf_counter()
        for name, dt in zip(timings, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            timings[name] += dt
        n_hit_blocks += match.n_blocks
        n_prompt_blocks += len(keys)
    total = sum(timings.values())
    parts = ", ".join(f"{name} {dt:.2f}" for name, dt in timings.items())
    what = (
        f"radix replay, {n_blocks:,} blocks: {len(requests):,} req, "
        f"{n_prompt_blocks / len(requests):.0f} blocks/prompt, block hit "
        f"{100 * n_hit_blocks / n_prompt_blocks:.1f}%, evicted {cache.n_evicted_blocks:,} "
        f"[{parts} s]"
    )
    return total, what


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mooncake", help="Mooncake JSONL trace (default: synthesized chains)")
    args = parser.parse_args()
    if args.mooncake:
        requests = mooncake_requests(args.mooncake)
    else:
        requests = synthetic_conversations(np.random.default_rng(0), 12_031)
    runs = [
        lambda: bench_alloc_free(1_000_000),
        lambda: bench_grow(5_000_000, 50_000),
        lambda: bench_radix(requests, n_blocks=8_000_000),
        lambda: bench_radix(requests, n_blocks=28_000),
    ]
    print(f"{'wall_s':>7} {'cpu_s':>7}  what (wall_s: the timed part; cpu_s: the whole row)")
    for run in runs:
        cpu_start = time.process_time()
        seconds, what = run()
        print(f"{seconds:7.2f} {time.process_time() - cpu_start:7.2f}  {what}")
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak_mib:.0f} MiB")


if __name__ == "__main__":
    main()
