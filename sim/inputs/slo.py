"""Percentile SLOs, shared by `simulate`, `sweep` and `plan`: `ttft_p99=2000`, `tpot_p90=100ms`, `e2e_p50=30s`.

**Units: a bare number is milliseconds**, as in vLLM's `vllm bench serve --goodput ttft:2000` and
AIConfigurator; a value may end in `ms` or `s`. A limit outside `PLAUSIBLE_MS` for its metric is
refused with one line (`ttft_p99=2` is 2 ms: nobody's first token; `2s` was meant).
vLLM's own spelling is accepted too: `--goodput ttft:2000 tpot:50 e2el:30000` (ms; `e2el` is E2E),
each a per-request limit that infersim judges at P99 (99% of requests within it: `ttft_p99=2000`).

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
# Input sanity, not hardware: the shortest and longest limit (ms) a person plausibly means per metric.
# The floors sit below any served model's first token / decode step and above seconds typed bare
# (`ttft_p99=2`, `tpot_p99=0.1`, `e2e_p90=30`); the ceilings above any interactive deadline (1 h, 1 min, 1 day).
PLAUSIBLE_MS = {"ttft": (10.0, 3.6e6), "tpot": (1.0, 6e4), "e2e": (100.0, 8.64e7)}
VLLM_GOODPUT_KEYS = {"ttft": "ttft", "tpot": "tpot", "e2el": "e2e"}  # vLLM's --goodput names -> infersim metrics
VLLM_GOODPUT_PERCENTILE = 99


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


def parse_slo(texts: list[str], goodput_min: float = DEFAULT_GOODPUT_MIN, where: str = "--slo",
              goodput_pairs: list[str] | None = None) -> PlanSLO:
    """`["ttft_p99=2000", "tpot_p99=100ms"]` (and vLLM's `goodput_pairs`, `["ttft:2000", "tpot:50"]`)
    -> PlanSLO. Raises InputError naming the bad item (unknown key, twice, no unit-plausible value)."""
    items = [(where, text) for text in texts or []] + [("--goodput", t) for t in vllm_goodput_slos(goodput_pairs)]
    if not items:
        raise InputError(where, None, f"give at least one SLO, e.g. {where} ttft_p99=2000 (ms; or 2s) or vLLM's "
                                      f"--goodput ttft:2000 (keys: {', '.join(SLO_KEYS)})")
    if not (0 < goodput_min <= 1):
        raise InputError("--min-finished", None, f"must be in (0, 1]; got {goodput_min}")
    limits: dict[str, SloLimit] = {}
    for flag, text in items:
        key, sep, value = text.partition("=")
        key = key.strip()
        if not sep:
            raise InputError(flag, text, "expected KEY=LIMIT, e.g. ttft_p99=2000 (ms), ttft_p99=2s or ttft_p99=2000ms")
        if key not in SLO_KEYS:
            raise InputError(flag, key, f"unknown SLO key; allowed: {', '.join(SLO_KEYS)}")
        if key in limits:
            raise InputError(flag, key, "given twice")
        metric = key.split("_p")[0]
        limits[key] = SloLimit(metric, int(key.split("_p")[1]), _seconds(value, flag, key, metric))
    return PlanSLO(tuple(limits.values()), goodput_min)


def vllm_goodput_slos(pairs: list[str] | None) -> list[str]:
    """vLLM's `--goodput ttft:2000 tpot:50 e2el:30000` (ms, per request; a token may hold several
    pairs separated by spaces) -> `["ttft_p99=2000ms", ...]`: each judged at P99 (99% within)."""
    out = []
    for token in " ".join(pairs or []).split():
        name, sep, value = token.partition(":")
        if not sep or name.strip().lower() not in VLLM_GOODPUT_KEYS:
            raise InputError("--goodput", token, f"vLLM's spelling is NAME:MS with NAME one of "
                                                 f"{', '.join(VLLM_GOODPUT_KEYS)} (e.g. --goodput ttft:2000 tpot:50); "
                                                 f"the least share finished is --min-finished")
        metric = VLLM_GOODPUT_KEYS[name.strip().lower()]
        bare = value.strip()
        out.append(f"{metric}_p{VLLM_GOODPUT_PERCENTILE}={bare}" + ("" if bare.lower().endswith("s") else "ms"))
    return out


def _seconds(value: str, where: str, key: str, metric: str) -> float:
    """A limit in seconds from `2000` (ms), `2000ms` or `2s`; refused when not in PLAUSIBLE_MS."""
    text = value.strip().lower()
    scale, unit = 1e-3, "ms"
    if text.endswith("ms"):
        text = text[:-2]
    elif text.endswith("s"):
        text, scale, unit = text[:-1], 1.0, "s"
    try:
        seconds = float(text) * scale
    except ValueError:
        seconds = math.nan
    if not (seconds > 0 and math.isfinite(seconds)):
        raise InputError(where, key, f"the limit must be a duration > 0 (a bare number is ms; or end it in ms or s); "
                                     f"got {value!r}")
    low_ms, high_ms = PLAUSIBLE_MS[metric]
    if not (low_ms <= seconds * 1e3 <= high_ms):
        hint = (f"; bare numbers are milliseconds (as in vLLM): for seconds write {text}s"
                if unit == "ms" and value.strip().lower() == text else "")
        raise InputError(where, key, f"{value!r} is {seconds * 1e3:g} ms: implausible for a {metric.upper()} limit "
                                     f"(allowed {low_ms:g} ms to {high_ms / 1e3:g} s){hint}")
    return seconds


def describe_slo(slo: PlanSLO) -> str:
    """The parsed SLOs for people, e.g. 'TTFT P99 <= 2.0 s, TPOT P99 <= 50 ms; >= 99% of requests finish'."""
    parts = [f"{s.metric.upper()} P{s.percentile} \u2264 {_duration(s.limit_s)}" for s in slo.limits]
    return ", ".join(parts) + f"; \u2265 {slo.goodput_min:.0%} of requests finish"


def _duration(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.1f} s" if round(seconds, 1) == seconds else f"{seconds:.3g} s"
    return f"{seconds * 1e3:.3g} ms"


def percentile_or_none(values: np.ndarray, q: float) -> float | None:
    values = values[~np.isnan(values)]
    return float(np.percentile(values, q)) if values.size else None


def good_requests(table: Mapping[str, np.ndarray], limits_s: dict[str, float]) -> np.ndarray:
    """Boolean per row of a requests table (`sim.run.summary.requests_columns`, or a DataFrame of them):
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
