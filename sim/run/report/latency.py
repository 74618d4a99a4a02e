"""Per-request latency, taken apart: where did each request's end-to-end time go?

A finished request's e2e time splits into four parts that add up exactly:

| part | from the requests table |
|---|---|
| queueing | `queue_delay_s` (arrival -> first scheduled) |
| prefill | `first_token_s - scheduled_s` |
| decode | `finish_s - first_token_s`, less the time spent preempted |
| preemption | `preempted_s` (waiting again or swapped out after a preemption) |

The engine records a request's total preempted time, not the phase it fell in, so the
preempted time is taken off the decode phase first and only the rest (when the decode phase is
shorter) off the prefill phase. A preemption during a chunked prefill that is shorter than the
decode phase is therefore counted as prefill time missing from decode: the four parts still add
up to e2e, but the prefill/decode split of such a request is approximate.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

PARTS = ("queueing_s", "prefill_s", "decode_s", "preemption_s")


def latency_parts(requests: pd.DataFrame) -> pd.DataFrame:
    """One row per FINISHED request: the four parts (seconds) and `e2e_s`, indexed by request_id."""
    done = requests[requests["status"] == "FINISHED"]
    prefill_phase = (done["first_token_s"] - done["scheduled_s"]).to_numpy()
    decode_phase = (done["finish_s"] - done["first_token_s"]).to_numpy()
    preempted = done["preempted_s"].to_numpy()
    from_decode = np.minimum(preempted, decode_phase)
    parts = pd.DataFrame(
        {
            "queueing_s": done["queue_delay_s"].to_numpy(),
            "prefill_s": prefill_phase - (preempted - from_decode),
            "decode_s": decode_phase - from_decode,
            "preemption_s": preempted,
            "e2e_s": done["e2e_s"].to_numpy(),
        },
        index=pd.Index(done["request_id"].to_numpy(), name="request_id"),
    )
    return parts


def slowest(parts: pd.DataFrame, quantile: float, column: str = "e2e_s") -> pd.DataFrame:
    """The slowest ceil((1 - quantile) * n) rows by `column` (at least one): the requests beyond the
    `quantile` percentile. Ties are broken by order, so the count is exact."""
    if not 0 < quantile < 1:
        raise ValueError("quantile must be in (0, 1)")
    n_tail = max(1, math.ceil(round((1 - quantile) * len(parts), 9)))
    return parts.sort_values(column, kind="stable").tail(n_tail)


def breakdown_table(requests_by_label: dict[str, pd.DataFrame], tail_quantile: float = 0.99) -> pd.DataFrame:
    """Mean latency parts per label (e.g. policy), for all finished requests ("mean") and for the
    slowest ones by e2e ("p99": the slowest 1% of requests, at least one; see `slowest`).

    Returns a frame indexed by (label, group) with the PARTS columns plus `e2e_s` and `n_requests`.
    """
    rows = []
    tail_name = f"p{tail_quantile * 100:g}"
    for label, requests in requests_by_label.items():
        parts = latency_parts(requests)
        if parts.empty:
            continue
        for group, chosen in (("mean", parts), (tail_name, slowest(parts, tail_quantile))):
            row = chosen[list(PARTS) + ["e2e_s"]].mean()
            rows.append({"label": label, "group": group, **row.to_dict(), "n_requests": len(chosen)})
    return pd.DataFrame(rows).set_index(["label", "group"])


def empirical_cdf(values) -> tuple[np.ndarray, np.ndarray]:
    """Sorted finite values and the fraction of values at or below each (for step plots)."""
    finite = np.sort(np.asarray(values, dtype=np.float64))
    finite = finite[np.isfinite(finite)]
    return finite, np.arange(1, finite.size + 1) / max(finite.size, 1)
