"""Percentile SLOs for the planner: `ttft_p99=2`, `tpot_p90=0.1`, `e2e_p50=30` (seconds).

A rate is *sustainable* when, over the measured requests of a run (all but the warm-up head),
  - for every SLO `<metric>_p<q>=<limit>`: the q-th percentile of that metric over the FINISHED
    requests is <= limit (TTFT = first token - arrival; TPOT = (finish - first token) / (output
    tokens - 1), over requests with 2+ output tokens; E2E = finish - arrival), and
  - goodput, the share of measured requests that FINISHED (not REJECTED), is >= `goodput_min`
    (0.99 by default).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sim.errors import InputError

METRICS = ("ttft", "tpot", "e2e")
PERCENTILES = (50, 90, 99)
SLO_KEYS = tuple(f"{m}_p{q}" for m in METRICS for q in PERCENTILES)
DEFAULT_GOODPUT_MIN = 0.99


@dataclass(frozen=True)
class SloLimit:
    metric: str  # ttft | tpot | e2e
    percentile: int  # 50 | 90 | 99
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


def parse_slo(texts: list[str], goodput_min: float = DEFAULT_GOODPUT_MIN, where: str = "--slo") -> PlanSLO:
    """`["ttft_p99=2", "tpot_p99=0.1"]` -> PlanSLO. Raises InputError naming the bad item."""
    if not texts:
        raise InputError(where, None, f"give at least one SLO, e.g. {where} ttft_p99=2 (keys: {', '.join(SLO_KEYS)})")
    if not (0 < goodput_min <= 1):
        raise InputError("--goodput", None, f"must be in (0, 1]; got {goodput_min}")
    limits: dict[str, SloLimit] = {}
    for text in texts:
        key, sep, value = text.partition("=")
        key = key.strip()
        if not sep:
            raise InputError(where, text, "expected KEY=SECONDS, e.g. ttft_p99=2")
        if key not in SLO_KEYS:
            raise InputError(where, key, f"unknown SLO key; allowed: {', '.join(SLO_KEYS)}")
        if key in limits:
            raise InputError(where, key, "given twice")
        limits[key] = SloLimit(key.split("_p")[0], int(key.split("_p")[1]), _seconds(value, where, key))
    return PlanSLO(tuple(limits.values()), goodput_min)


def _seconds(value: str, where: str, key: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not (seconds > 0 and math.isfinite(seconds)):
        raise InputError(where, key, f"the limit must be a number of seconds > 0; got {value!r}")
    return seconds
