"""Percentile SLOs, shared by `simulate`, `sweep` and `plan`: `ttft_p99=2`, `tpot_p90=100ms`, `e2e_p50=30s`.

A bare number is seconds; a value may end in `s` or `ms` (vLLM's bench speaks milliseconds).

A run *meets* the SLOs when, over the requests judged:
  - for every SLO `<metric>_p<q>=<limit>`: the q-th percentile of that metric over the FINISHED
    requests is <= limit (TTFT = first token - arrival; TPOT = (finish - first token) / (output
    tokens - 1), over requests with 2+ output tokens; E2E = finish - arrival), and
  - the share of judged requests that FINISHED (not REJECTED) is >= `goodput_min` (0.99 by default).

Per-request goodput (what `summary.json` calls `goodput`): a request is *good* when it finished and
each of its own metrics is within every SLO's limit (a request without a TPOT, one output token,
passes the TPOT limit). Attainment of one SLO: the share of judged requests that finished within
that SLO's limit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from sim.errors import InputError

METRICS = ("ttft", "tpot", "e2e")
PERCENTILES = (50, 90, 95, 99)
SLO_KEYS = tuple(f"{m}_p{q}" for m in METRICS for q in PERCENTILES)
DEFAULT_GOODPUT_MIN = 0.99


@dataclass(frozen=True)
class SloLimit:
    metric: str  # ttft | tpot | e2e
    percentile: int  # one of PERCENTILES
    limit_s: float

    @property
    def key(self) -> str:
        return f"{self.metric}_p{self.percentile}"

    @property
    def column(self) -> str:
        """The requests-frame column the percentile is taken over."""
        return f"{self.metric}_s"


@dataclass(frozen=True)
class PlanSLO:
    limits: tuple[SloLimit, ...]
    goodput_min: float = DEFAULT_GOODPUT_MIN

    def to_dict(self) -> dict:
        return {"limits_s": {s.key: s.limit_s for s in self.limits}, "goodput_min": self.goodput_min}

    def per_request_limits_s(self) -> dict[str, float]:
        """{column: tightest limit} for per-request goodput, e.g. {"ttft_s": 2.0}."""
        limits: dict[str, float] = {}
        for s in self.limits:
            limits[s.column] = min(limits.get(s.column, math.inf), s.limit_s)
        return limits


def parse_slo(texts: list[str], goodput_min: float = DEFAULT_GOODPUT_MIN, where: str = "--slo") -> PlanSLO:
    """`["ttft_p99=2", "tpot_p99=100ms"]` -> PlanSLO. Raises InputError naming the bad item."""
    if not texts:
        raise InputError(where, None, f"give at least one SLO, e.g. {where} ttft_p99=2 (keys: {', '.join(SLO_KEYS)})")
    if not (0 < goodput_min <= 1):
        raise InputError("--goodput", None, f"must be in (0, 1]; got {goodput_min}")
    limits: dict[str, SloLimit] = {}
    for text in texts:
        key, sep, value = text.partition("=")
        key = key.strip()
        if not sep:
            raise InputError(where, text, "expected KEY=SECONDS, e.g. ttft_p99=2 or ttft_p99=2000ms")
        if key not in SLO_KEYS:
            raise InputError(where, key, f"unknown SLO key; allowed: {', '.join(SLO_KEYS)}")
        if key in limits:
            raise InputError(where, key, "given twice")
        limits[key] = SloLimit(key.split("_p")[0], int(key.split("_p")[1]), _seconds(value, where, key))
    return PlanSLO(tuple(limits.values()), goodput_min)


def _seconds(value: str, where: str, key: str) -> float:
    text = value.strip().lower()
    scale = 1.0
    if text.endswith("ms"):
        text, scale = text[:-2], 1e-3
    elif text.endswith("s"):
        text = text[:-1]
    try:
        seconds = float(text) * scale
    except ValueError:
        seconds = math.nan
    if not (seconds > 0 and math.isfinite(seconds)):
        raise InputError(where, key, f"the limit must be a duration > 0 (seconds, or with s/ms); got {value!r}")
    return seconds


def percentile_or_none(values: np.ndarray, q: float) -> float | None:
    values = values[~np.isnan(values)]
    return float(np.percentile(values, q)) if values.size else None


def good_requests(table: Mapping[str, np.ndarray], limits_s: dict[str, float]) -> np.ndarray:
    """Boolean per row of a requests table (`sim.summary.requests_columns`, or a DataFrame of them):
    FINISHED and every metric column within its limit (NaN passes: no TPOT)."""
    ok = np.asarray(table["status"]) == "FINISHED"
    for column, limit_s in limits_s.items():
        values = np.asarray(table[column], dtype=float)
        ok &= np.where(np.isnan(values), 0.0, values) <= limit_s
    return ok


def slo_report(table: Mapping[str, np.ndarray], slo: PlanSLO, duration_s: float | None) -> dict:
    """How a run did against `slo` over the rows of a requests table: per SLO its percentile value,
    limit, whether it is met and its attainment; goodput (good requests: count, share, req/s); `met`."""
    finished = np.asarray(table["status"]) == "FINISHED"
    n, n_finished = finished.shape[0], int(np.count_nonzero(finished))
    per_slo = {}
    for s in slo.limits:
        value = percentile_or_none(np.asarray(table[s.column], dtype=float)[finished], s.percentile)
        within = good_requests(table, {s.column: s.limit_s})
        per_slo[s.key] = {"value_s": value, "value_ms": None if value is None else value * 1e3,
                          "limit_s": s.limit_s, "limit_ms": s.limit_s * 1e3,
                          "met": value is not None and value <= s.limit_s,
                          "attainment": float(within.mean()) if n else 0.0}
    good = good_requests(table, slo.per_request_limits_s())
    finished_share = n_finished / n if n else 0.0
    n_good = int(good.sum())
    return {
        "limits_s": {s.key: s.limit_s for s in slo.limits}, "goodput_min": slo.goodput_min,
        "per_slo": per_slo, "finished_share": finished_share,
        "goodput": {"n_met": n_good, "fraction": n_good / n if n else 0.0,
                    "request_throughput": n_good / duration_s if duration_s else 0.0},
        "met": finished_share >= slo.goodput_min and all(v["met"] for v in per_slo.values()),
    }
