"""The highest sustainable arrival rate: bracket by doubling (or halving), then bisect.

Rates live on a geometric lattice, rate_k = 2 ** (k / STEPS_PER_DOUBLING) qps, so adjacent
rates differ by 2 ** (1/16) - 1 = 4.4% (the search's relative tolerance). Assuming the verdict is
monotone in rate (a replica that meets the SLOs at rate r meets them at every lower rate), the
search returns exactly the largest lattice rate that passes, whatever the start rate; hence a
looser SLO, whose passing set contains the tighter one's, never gets a lower answer.

With `confirm` (a slower, surer verdict: sim.planner.evaluate.confirm_rate), the rate found is
confirmed, and while confirmation fails the search steps down the lattice, confirming each rate; the
confirmed verdict replaces the quick one at its rate.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

STEPS_PER_DOUBLING = 16


class Verdict(Protocol):
    rate_qps: float
    passes: bool


@dataclass
class SearchOutcome:
    """`max_qps`: the largest passing lattice rate (None: not even `min_qps` passes).
    `limit_point`: the verdict at the lowest failing rate searched (just above max_qps: what
    binds); None when the ceiling passed. `points`: every verdict, by rate."""

    max_qps: float | None
    limit_point: Verdict | None
    points: list[Verdict] = field(default_factory=list)
    hit_ceiling: bool = False


def lattice_rate(k: int) -> float:
    return 2.0 ** (k / STEPS_PER_DOUBLING)


def lattice_index(rate_qps: float, rounding: Callable[[float], float] = round) -> int:
    return int(rounding(STEPS_PER_DOUBLING * math.log2(rate_qps)))


def search_max_rate(evaluate: Callable[[float], Verdict], start_qps: float = 1.0,
                    min_qps: float = 1 / 128, max_qps: float = 1024.0,
                    confirm: Callable[[float], Verdict] | None = None) -> SearchOutcome:
    """Search the lattice between min_qps (rounded up) and max_qps (rounded down), starting near
    start_qps: double while the start passes, else test the floor and halve from the start;
    then bisect the bracket down to adjacent lattice points, and confirm (see the module
    docstring). Each rate is evaluated once (and confirmed at most once)."""
    k_min, k_max = lattice_index(min_qps, math.ceil), lattice_index(max_qps, math.floor)
    if k_min > k_max:
        raise ValueError(f"empty rate range [{min_qps}, {max_qps}]")
    verdicts: dict[int, Verdict] = {}

    def passes(k: int) -> bool:
        if k not in verdicts:
            verdicts[k] = evaluate(lattice_rate(k))
        return verdicts[k].passes

    bracket = _bracket(passes, min(max(lattice_index(start_qps), k_min), k_max), k_min, k_max)
    points = lambda: [verdicts[k] for k in sorted(verdicts)]  # noqa: E731
    if bracket is None:
        return SearchOutcome(None, verdicts[k_min], points())
    lo, hi = bracket
    while hi is not None and hi - lo > 1:
        mid = (lo + hi) // 2
        if passes(mid):
            lo = mid
        else:
            hi = mid
    while confirm is not None:
        verdicts[lo] = confirm(lattice_rate(lo))
        if verdicts[lo].passes:
            break
        hi = lo
        if lo == k_min:
            return SearchOutcome(None, verdicts[k_min], points())
        lo -= 1
    if hi is None:
        return SearchOutcome(lattice_rate(lo), None, points(), hit_ceiling=True)
    return SearchOutcome(lattice_rate(lo), verdicts[hi], points())


def _bracket(passes: Callable[[int], bool], k_start: int, k_min: int, k_max: int) -> tuple[int, int | None] | None:
    """(lo, hi) with lo passing and hi failing (hi None: the ceiling passes); None: the floor fails."""
    if passes(k_start):
        lo = k_start
        while lo < k_max:
            up = min(lo + STEPS_PER_DOUBLING, k_max)
            if not passes(up):
                return lo, up
            lo = up
        return lo, None
    if k_start == k_min or not passes(k_min):
        return None
    hi = k_start
    while hi - STEPS_PER_DOUBLING > k_min:
        down = hi - STEPS_PER_DOUBLING
        if passes(down):
            return down, hi
        hi = down
    return k_min, hi
