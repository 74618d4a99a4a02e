"""Per-hour outcomes of a day, tallied as each request ends (bounded memory: counts and
log-spaced latency histograms per hour, never a row per request).

A request counts in the hour it arrived. It is *good* when it finished with every per-request
SLO limit met (TTFT, TPOT over 2+ output tokens, E2E); lost (its replica failed, on_failure=lost)
and rejected requests are never good. Percentiles come from the histograms: the upper edge of the
bin holding the q-th request (HIST_BINS log bins from HIST_MIN_S to HIST_MAX_S: within ~3.5 %).
"""

from __future__ import annotations

import math

import numpy as np

from sim.engine.request import Status
from sim.inputs.config import SLO

HIST_MIN_S, HIST_MAX_S, HIST_BINS = 1e-4, 1e5, 600
EDGES_S = np.geomspace(HIST_MIN_S, HIST_MAX_S, HIST_BINS + 1)
_LOG_MIN, _LOG_STEP = math.log(HIST_MIN_S), math.log(HIST_MAX_S / HIST_MIN_S) / HIST_BINS
COUNTS = ("arrived", "finished", "good", "lost", "rejected", "retried")


def _bin(value_s: float) -> int:
    if value_s <= HIST_MIN_S:
        return 0
    return min(int((math.log(value_s) - _LOG_MIN) / _LOG_STEP), HIST_BINS - 1)


class Tally:
    def __init__(self, duration_s: float, slo: SLO, bucket_s: float = 3600.0):
        self.bucket_s = bucket_s
        self.n_hours = max(int(math.ceil(duration_s / bucket_s)), 1)  # buckets (hours unless bucket_s says otherwise)
        self.counts = {name: np.zeros(self.n_hours, dtype=np.int64) for name in COUNTS}
        self.ttft_hist = np.zeros((self.n_hours, HIST_BINS), dtype=np.int64)
        self.e2e_hist = np.zeros((self.n_hours, HIST_BINS), dtype=np.int64)
        self.inf = math.inf
        self.ttft_max_s = slo.ttft_s or math.inf
        self.tpot_max_s = slo.tpot_s or math.inf
        self.e2e_max_s = slo.e2e_s or math.inf

    def hour(self, arrival_s: float) -> int:
        return min(int(arrival_s // self.bucket_s), self.n_hours - 1)

    def add(self, name: str, arrival_s: float) -> None:
        self.counts[name][self.hour(arrival_s)] += 1

    def ended(self, table, row: int, lost: bool = False) -> None:
        """Tally `row` (finished or rejected; `lost`: its replica failed)."""
        arrival_s = float(table.arrival_s[row])
        hour = self.hour(arrival_s)
        if table.status[row] != Status.FINISHED:
            self.counts["lost" if lost else "rejected"][hour] += 1
            return
        self.counts["finished"][hour] += 1
        ttft_s = float(table.first_token_s[row]) - arrival_s
        e2e_s = float(table.finish_s[row]) - arrival_s
        n_out = int(table.output_tokens[row])
        tpot_s = (float(table.finish_s[row]) - float(table.first_token_s[row])) / (n_out - 1) if n_out > 1 else 0.0
        self.ttft_hist[hour, _bin(ttft_s)] += 1
        self.e2e_hist[hour, _bin(e2e_s)] += 1
        if ttft_s <= self.ttft_max_s and tpot_s <= self.tpot_max_s and e2e_s <= self.e2e_max_s:
            self.counts["good"][hour] += 1

    def hours(self) -> list[dict]:
        """One row per hour: counts, SLO attainment (good / arrived) and TTFT/E2E p50, p99."""
        rows = []
        for hour in range(self.n_hours):
            row = {"hour": hour} if self.bucket_s == 3600.0 else {"start_s": hour * self.bucket_s}
            row.update({f"n_{name}": int(self.counts[name][hour]) for name in COUNTS})
            arrived = row["n_arrived"]
            row["slo_attainment"] = row["n_good"] / arrived if arrived else None
            for name, hist in (("ttft", self.ttft_hist[hour]), ("e2e", self.e2e_hist[hour])):
                row[f"{name}_p50_s"], row[f"{name}_p99_s"] = percentile_s(hist, 50), percentile_s(hist, 99)
            rows.append(row)
        return rows

    def totals(self) -> dict:
        out = {f"n_{name}": int(self.counts[name].sum()) for name in COUNTS}
        out["slo_attainment"] = out["n_good"] / out["n_arrived"] if out["n_arrived"] else None
        for name, hist in (("ttft", self.ttft_hist.sum(axis=0)), ("e2e", self.e2e_hist.sum(axis=0))):
            out[f"{name}_p50_s"], out[f"{name}_p99_s"] = percentile_s(hist, 50), percentile_s(hist, 99)
        return out


def percentile_s(hist: np.ndarray, q: float) -> float | None:
    """The upper edge of the bin holding the q-th percentile of the histogram's values."""
    total = int(hist.sum())
    if total == 0:
        return None
    index = int(np.searchsorted(np.cumsum(hist), math.ceil(total * q / 100.0)))
    return float(EDGES_S[index + 1])
