"""Tables for people from run summaries (summary.json dicts): latencies in ms, rates per second."""

from __future__ import annotations

import pandas as pd

# (column shown, summary key, statistic or None for a scalar, scale)
HEADLINE = (
    ("finished", "n_finished", None, 1),
    ("rejected", "n_rejected", None, 1),
    ("req/s", "request_throughput", None, 1),
    ("out tok/s", "output_throughput_tok_s", None, 1),
    ("TTFT p50 ms", "ttft_s", "p50", 1e3),
    ("TTFT p99 ms", "ttft_s", "p99", 1e3),
    ("TPOT p50 ms", "tpot_s", "p50", 1e3),
    ("TPOT p99 ms", "tpot_s", "p99", 1e3),
    ("E2E p99 s", "e2e_s", "p99", 1),
    ("queue p99 s", "queue_delay_s", "p99", 1),
    ("preemptions", "preemptions", None, 1),
    ("KV util", "kv_utilization_mean", None, 1),
    ("KV frag", "kv_fragmentation", None, 1),
    ("prefix hit", "prefix_hit_rate", None, 1),
)
COUNT_KEYS = frozenset({"n_requests", "n_finished", "n_rejected", "n_steps", "preemptions", "num_gpu_blocks"})


def summary_value(summary: dict, key: str, stat: str | None = None) -> float | None:
    """`summary[key]` or `summary[key][stat]`; None where the run had nothing to measure."""
    value = summary.get(key)
    if stat is not None:
        value = None if value is None else value.get(stat)
    return None if value is None else float(value)


def headline_table(summaries: dict[str, dict], columns=HEADLINE) -> pd.DataFrame:
    """One row per label (e.g. policy or config) with the headline metrics, in display units."""
    rows = {}
    for label, summary in summaries.items():
        row = {}
        for shown, key, stat, scale in columns:
            value = summary_value(summary, key, stat)
            row[shown] = None if value is None else value * scale
        rows[label] = row
    table = pd.DataFrame.from_dict(rows, orient="index")
    for shown, key, _, _ in columns:
        if key in COUNT_KEYS:
            table[shown] = table[shown].astype("Int64")  # counts read as counts
    return table
