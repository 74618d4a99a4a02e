"""Stop a verification run the moment it can no longer pass its SLOs.

For an SLO `<metric>_p<q>=<limit>` judged over m values (np.percentile interpolates between the
order statistics at floor(h) and ceil(h), h = q/100 (m - 1)), the percentile is above the limit as
soon as the value at floor(h) is, i.e. once at least m - floor(h) values are above it. That count
never falls as m grows, so with N requests in the run (m <= N) a run whose finished requests already
hold N - floor(q (N - 1) / 100) values above the limit fails whatever happens next. Likewise for
`goodput_min`: once more requests were rejected than a pass allows. A finished request's metrics
never change, so the verdict is certain; only the wait for it is saved.

Only plain open-loop, aggregated runs without parallel samples are watched (one table row per request).
"""

from __future__ import annotations

import math

from sim.engine.request import RequestTable, Status
from sim.inputs.slo import PlanSLO


class FailureWatch:
    """`finished(row)` after each request ends; True once the run is certain to fail. `reason` says why."""

    def __init__(self, slo: PlanSLO):
        self.slo = slo
        self.reason: str | None = None
        self.table: RequestTable | None = None

    def bind(self, table: RequestTable) -> None:
        n = table.n_requests
        self.table = table
        self._over = [0] * len(self.slo.limits)
        self._needed = [n - (s.percentile * (n - 1)) // 100 for s in self.slo.limits]
        self._rejected = 0

    def finished(self, row: int) -> bool:
        t = self.table
        if t.status[row] == Status.REJECTED:
            self._rejected += 1
            n = t.n_requests
            if (n - self._rejected) / n < self.slo.goodput_min:  # the best finished share left (as slo_report)
                self.reason = (f"{self._rejected} of {t.n_requests} requests rejected: fewer than "
                               f"{self.slo.goodput_min:.0%} can finish")
                return True
            return False
        for i, s in enumerate(self.slo.limits):
            value = _metric_s(t, row, s.metric)
            if value > s.limit_s:  # NaN (no TPOT) is never above
                self._over[i] += 1
                if self._over[i] >= self._needed[i]:
                    self.reason = (f"{self._over[i]} of {t.n_requests} requests above {s.key} = "
                                   f"{s.limit_s * 1e3:.0f} ms: its P{s.percentile} is above the limit whatever follows")
                    return True
        return False


def _metric_s(t: RequestTable, row: int, metric: str) -> float:
    """The request's TTFT, TPOT or E2E, computed as `sim.run.summary.requests_frame` does."""
    if metric == "ttft":
        return float(t.first_token_s[row] - t.arrival_s[row])
    if metric == "e2e":
        return float(t.finish_s[row] - t.arrival_s[row])
    generated = int(t.n_tokens[row] - t.prompt_tokens[row])
    if generated <= 1:
        return math.nan
    return float((t.finish_s[row] - t.first_token_s[row]) / (generated - 1))
