"""`describe`: the numbers a person checks first about a workload."""

from __future__ import annotations

import numpy as np

from sim.inputs.workload.prefix import prefix_hit_rate_infinite
from sim.inputs.workload.trace import ClosedLoop, Trace
from sim.inputs.workload.transforms import mean_qps

PERCENTILES = (50, 90, 99)


def _summary(values: np.ndarray) -> dict:
    summary = {"mean": float(values.mean())}
    for q, value in zip(PERCENTILES, np.percentile(values, PERCENTILES)):
        summary[f"p{q}"] = float(value)
    summary["max"] = int(values.max())
    return summary


def _interarrival_cv(arrival_s: np.ndarray) -> float | None:
    gaps = np.diff(arrival_s)
    if len(gaps) < 2 or gaps.mean() == 0:
        return None
    return float(gaps.std() / gaps.mean())


def describe(workload: Trace | ClosedLoop) -> dict:
    """Counts, duration, rate, length statistics and the infinite-cache prefix hit rate
    (None without hash ids). A ClosedLoop describes its request pool; its duration and
    rate are None (the engine decides them) and it adds concurrency and think time."""
    trace = workload.pool if isinstance(workload, ClosedLoop) else workload
    open_loop = not isinstance(workload, ClosedLoop)
    samples = trace.samples()
    result = {
        "source": trace.source,
        "n_requests": len(trace),
        "duration_s": float(trace.arrival_s[-1] - trace.arrival_s[0]) if open_loop else None,
        "mean_qps": mean_qps(trace) if open_loop else None,
        "interarrival_cv": _interarrival_cv(trace.arrival_s) if open_loop else None,
        "mean_input_tokens": float(trace.prompt_tokens.mean()),
        "mean_output_tokens": float(trace.output_tokens.mean()),
        "input_tokens": _summary(trace.prompt_tokens),
        "output_tokens": _summary(trace.output_tokens),
        "total_input_tokens": int(trace.prompt_tokens.sum()),
        "total_output_tokens": int((trace.output_tokens * samples).sum()),
        "mean_samples": float(samples.mean()),
        "hash_block_tokens": trace.hash_block_tokens if trace.has_hash_ids else None,
        "prefix_hit_rate_infinite": prefix_hit_rate_infinite(trace),
    }
    if not open_loop:
        result["closed_loop"] = {
            "concurrency": workload.concurrency,
            "think_time_s": workload.think_time_s,
        }
    return result


def format_description(summary: dict) -> str:
    """A short aligned text table of `describe`'s result, for people."""

    def number(value) -> str:
        if value is None:
            return "-"
        return f"{value:,.3f}" if isinstance(value, float) else f"{value:,}"

    rows = [
        (key, number(summary[key]))
        for key in (
            "n_requests",
            "duration_s",
            "mean_qps",
            "interarrival_cv",
            "mean_samples",
            "total_input_tokens",
            "total_output_tokens",
            "hash_block_tokens",
        )
    ]
    for name in ("input_tokens", "output_tokens"):
        stats = summary[name]
        rows.append((name, "  ".join(f"{k} {number(v)}" for k, v in stats.items())))
    rate = summary["prefix_hit_rate_infinite"]
    rows.append(("prefix_hit_rate_infinite", "-" if rate is None else f"{rate:.1%}"))
    if "closed_loop" in summary:
        loop = summary["closed_loop"]
        rows.append(
            (
                "closed_loop",
                f"concurrency {loop['concurrency']}  think_time_s {loop['think_time_s']}",
            )
        )
    width = max(len(key) for key, _ in rows)
    lines = [f"workload {summary['source']}"] + [
        f"  {key:<{width}}  {value}" for key, value in rows
    ]
    return "\n".join(lines)
