"""SLOs over sweep rows: which points meet `--slo` (same syntax and meaning as `plan`), and the
order best-first by an objective.

A row meets the SLOs when every `<metric>_p<q>` SLO's column `<metric>_s_p<q>` is within its limit
and at least `goodput_min` of its requests finished. `goodput_request_throughput` (good requests per
second, each within every limit) comes from the row's own summary (the base config's `slo`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sim.errors import InputError
from sim.inputs.slo import PlanSLO

if TYPE_CHECKING:  # imported where used: a sweep point's worker never needs pandas
    import pandas as pd

SWEEP_PERCENTILES = (50, 90, 95, 99)  # every SLO key's percentile has a column
LOWER_IS_BETTER_MARKS = ("_s_", "_ms_", "latency", "preemptions", "kv_fragmentation")


def add_slo_columns(frame: pd.DataFrame, slo: PlanSLO) -> pd.DataFrame:
    """`frame` with `meets_slo` (bool) and, per SLO, `<key>_ratio` (value / limit) added."""
    import pandas as pd

    frame = frame.copy()
    ok = frame["n_finished"] / frame["n_requests"] >= slo.goodput_min
    for s in slo.limits:
        column = f"{s.column}_p{s.percentile}"
        values = pd.to_numeric(frame[column], errors="coerce") if column in frame else pd.Series(float("nan"),
                                                                                                  index=frame.index)
        frame[f"{s.key}_ratio"] = values / s.limit_s
        ok &= values <= s.limit_s
    frame["meets_slo"] = ok.fillna(False).astype(bool)
    return frame


def lower_is_better(metric: str) -> bool:
    return any(mark in metric for mark in LOWER_IS_BETTER_MARKS)


def sort_best_first(frame: pd.DataFrame, objective: str) -> pd.DataFrame:
    """Rows best-first by `objective` (higher first for throughputs and goodput, lower first for
    latencies); points meeting the SLOs before the others when the frame has `meets_slo`."""
    import pandas as pd

    if objective not in frame.columns:
        numeric = [c for c in frame.columns if pd.api.types.is_numeric_dtype(frame[c])]
        raise InputError("--objective", objective, f"not a result column; e.g. {', '.join(numeric[:8])}")
    keys, ascending = [objective], [lower_is_better(objective)]
    if "meets_slo" in frame.columns:
        keys, ascending = ["meets_slo", *keys], [False, *ascending]
    return frame.sort_values(keys, ascending=ascending, kind="stable", na_position="last").reset_index(drop=True)
