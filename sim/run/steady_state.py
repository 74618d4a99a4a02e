"""Did a run reach steady state, and did the system keep up there?

A latency percentile says something about a deployment only when the run lasted long enough for the
queue and the batch to settle. At 70 req/s a 1,000-request slice arrives in ~14 s; if one request
lives ~20 s, no request has finished when the last one arrives: the batch is still filling, nothing
has queued yet, and every percentile measures the run's length, not the system (issue 45).

Time is measured in request lifetimes L (the mean end-to-end latency of the judged requests that
finished, at the tested rate: by Little's law the system holds rate x L requests in steady state, and
it takes about one lifetime to fill). A run is *long enough* when

- its warm-up (the unjudged leading requests) arrives over at least WARMUP_LIFETIMES lifetimes, so the
  batch is full when judging starts, and
- its judged requests arrive over at least MEASURED_LIFETIMES lifetimes, so a system that falls behind
  builds a visible queue (a 10 % overload queues 0.1 x rate x 4 L requests: 0.4 L of waiting, far past
  any TTFT limit near L's scale).

It *kept up* when its queue delay did not grow across the judged requests
(sim.run.load_check.queue_growth, the signal `simulate` warns on). Departures over arrivals in the judged
window (`served_share`) are reported, not judged: with long-tailed lifetimes a window that starts one
mean lifetime in still sees the longest requests filling up, and the share reads low on a stable run.
`needed_requests` is how many requests at this arrival rate make
a run long enough (with LENGTH_MARGIN to spare, since L grows with the load).

A capacity is *claimed* only on a longer run, CONFIRM_LIFETIMES judged lifetimes: near its limit a
replica's load swings slowly (a batch near saturation relaxes over several lifetimes: on gpt-oss-120b /
H200 TP1 at 10.8 req/s the mean TPOT of consecutive 3.7-lifetime windows ranged 43.7-49.9 ms), so a
P99 read on four lifetimes sees one or two of those swings and can sit 5-10 % under the deployment's.
Twenty lifetimes make four stretches of five for the percentile's confidence bound
(sim.run.percentile_bound), each long enough to span a swing. A percentile q asks for more: at least
1 / (1 - q) lifetimes, a hundred for a P99. Requests that overlap share their batch's fate (the
prefills that land during one request's decode land during its neighbours' too), so a P99 over
requests is nearly a P99 over lifetimes, and a run of 26 lifetimes reads roughly the 96th: on
Llama-3.1-405B / B200 TP8 at 1.68 req/s, P99 TPOT read 47.7-50.4 ms on five draws of 1,000 requests
(26 lifetimes) and 50.5-50.7 ms on two of 5,000 (130). A confirmation asks for that many lifetimes
within CONFIRM_BUDGET_REQUESTS requests, and never fewer than CONFIRM_LIFETIMES (`within_budget`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

import numpy as np

from sim.run.load_check import queue_growth

WARMUP_LIFETIMES = 1.0
MEASURED_LIFETIMES = 4.0
CONFIRM_LIFETIMES = 20.0  # judged lifetimes of the run a capacity or a verification is claimed on, at least
CONFIRM_BUDGET_REQUESTS = 20_000  # a confirmation asking for more lifetimes than this holds takes this many
LENGTH_MARGIN = 1.25


@dataclass(frozen=True)
class SteadyState:
    """What a run showed about steady state (see the module docstring); lifetimes are None when no
    judged request finished (then nothing can be said: `long_enough` False)."""

    lifetime_s: float | None
    warmup_lifetimes: float | None
    measured_lifetimes: float | None
    arrivals_in_window: int
    departures_in_window: int
    queue_growth_s_per_min: float | None
    long_enough: bool
    kept_up: bool
    needed_requests: int | None
    required_lifetimes: float = MEASURED_LIFETIMES  # judged lifetimes this reading asked for

    @property
    def served_share(self) -> float | None:
        return self.departures_in_window / self.arrivals_in_window if self.arrivals_in_window else None

    def to_dict(self) -> dict:
        return {**asdict(self), "served_share": self.served_share}

    def verdict(self) -> str:
        """One phrase: why the run can or cannot be trusted as steady state."""
        if not self.kept_up:
            share = self.served_share
            served = "" if share is None else f"{share:.0%} of arrivals served"
            growth = self.queue_growth_s_per_min
            queue = "" if growth is None else f"queue growing {growth:.3g} s/min"
            return "fell behind: " + ", ".join(p for p in (served, queue) if p)
        if not self.long_enough:
            if self.lifetime_s is None:
                return "too short to tell: no judged request finished"
            needed = "" if self.needed_requests is None else f"; ~{self.needed_requests:,} requests"
            return (f"too short to tell: {self.measured_lifetimes:.2g} request lifetimes judged after "
                    f"{self.warmup_lifetimes:.2g} of warm-up (needs {self.required_lifetimes:g} after "
                    f"{WARMUP_LIFETIMES:g}{needed})")
        return f"steady: {self.measured_lifetimes:.2g} request lifetimes judged, kept up"


def steady_state(table: Mapping[str, np.ndarray], n_warmup: int,
                 required_lifetimes: float = MEASURED_LIFETIMES) -> SteadyState:
    """The steady-state reading of a requests table (sim.run.summary.requests_columns, rows in arrival
    order) whose first `n_warmup` rows are warm-up; long enough with `required_lifetimes` judged."""
    arrival = np.asarray(table["arrival_s"], dtype=float)
    n_warmup = min(max(n_warmup, 0), max(len(arrival) - 1, 0))
    status = np.asarray(table["status"])
    finish = np.asarray(table["finish_s"], dtype=float)
    judged = slice(n_warmup, len(arrival))
    ended = np.isin(status, ("FINISHED", "REJECTED"))
    done = status[judged] == "FINISHED"
    e2e = (finish[judged] - arrival[judged])[done]
    start_s, end_s = (float(arrival[n_warmup]), float(arrival[-1])) if len(arrival) else (0.0, 0.0)
    n_arrived = int(np.count_nonzero((arrival > start_s) & (arrival <= end_s)))
    n_left = int(np.count_nonzero(ended & (finish > start_s) & (finish <= end_s)))
    growth = queue_growth({k: np.asarray(table[k])[judged] for k in ("arrival_s", "queue_delay_s", "status",
                                                                      "finish_s")})
    lifetime_s = float(e2e.mean()) if e2e.size else None
    if lifetime_s is None or lifetime_s <= 0:
        return SteadyState(None, None, None, n_arrived, n_left, growth["queue_growth_s_per_min"], False,
                           not growth["overloaded"], None, required_lifetimes)
    warmup_lifetimes = (start_s - float(arrival[0])) / lifetime_s
    measured_lifetimes = (end_s - start_s) / lifetime_s
    rate_qps = n_arrived / (end_s - start_s) if end_s > start_s else None
    long_enough = warmup_lifetimes >= WARMUP_LIFETIMES and measured_lifetimes >= required_lifetimes
    kept_up = not growth["overloaded"]
    needed = None
    if rate_qps:
        needed = math.ceil(rate_qps * lifetime_s * (WARMUP_LIFETIMES + required_lifetimes) * LENGTH_MARGIN)
    return SteadyState(lifetime_s, warmup_lifetimes, measured_lifetimes, n_arrived, n_left,
                       growth["queue_growth_s_per_min"], long_enough, kept_up, needed, required_lifetimes)


def confirm_lifetimes(percentiles: Iterable[float]) -> float:
    """Judged lifetimes a confirmation asks for: CONFIRM_LIFETIMES, and 1 / (1 - q) for each SLO
    percentile q (see the module docstring)."""
    return max([CONFIRM_LIFETIMES, *(100.0 / (100.0 - q) for q in percentiles)])


def within_budget(required_lifetimes: float, reading: SteadyState,
                  budget_requests: int = CONFIRM_BUDGET_REQUESTS) -> float:
    """`required_lifetimes`, or fewer (never under CONFIRM_LIFETIMES) where a run of them at this
    reading's rate and lifetime would take more than `budget_requests` requests."""
    needed = reading.needed_requests
    if required_lifetimes <= CONFIRM_LIFETIMES or needed is None or needed <= budget_requests:
        return required_lifetimes
    return max(CONFIRM_LIFETIMES, required_lifetimes * budget_requests / needed)


def warmup_requests(rate_qps: float, lifetime_s: float) -> int:
    """Leading requests that fill the system at `rate_qps` (WARMUP_LIFETIMES lifetimes, with margin)."""
    return math.ceil(rate_qps * lifetime_s * WARMUP_LIFETIMES * LENGTH_MARGIN)


def steady_state_of_run(table: Mapping[str, np.ndarray],
                        required_lifetimes: float = MEASURED_LIFETIMES) -> SteadyState:
    """`steady_state` of a whole run judged as a deployment would be (every request counts): the
    requests arriving in its first WARMUP_LIFETIMES lifetimes (mean end-to-end latency of all that
    finished) taken as its warm-up."""
    arrival = np.asarray(table["arrival_s"], dtype=float)
    finished = np.asarray(table["status"]) == "FINISHED"
    if not finished.any() or not arrival.size:
        return steady_state(table, 0, required_lifetimes)
    lifetime_s = float((np.asarray(table["finish_s"], dtype=float) - arrival)[finished].mean())
    n_warmup = int(np.searchsorted(arrival, arrival[0] + WARMUP_LIFETIMES * lifetime_s))
    return steady_state(table, n_warmup, required_lifetimes)
