"""One budget for what a command will allocate, checked before anything is generated.

Every input is bounded on its own by its schema (`sim.schema`: MAX_TOKENS, MAX_REQUESTS), but
memory and time go as products: requests x samples, a prompt after its shared prefix is put
in front, prefix hash ids (one per block of every prompt), replicas of every kind, requests x
replays (uncertainty draws, disaggregated layouts). `require` refuses a product above its limit
with one line naming the inputs that make it, before a single array of that size exists.

The limits are sized for a machine with a few GiB free: int64 columns of MAX_ROWS rows, hash
ids of MAX_HASH_IDS x 8 bytes (4 GiB), and runs that finish in hours, not years.
"""

from __future__ import annotations

import math

from sim.errors import InputError
from sim.schema import MAX_RATE_QPS, MAX_REQUESTS, MAX_TOKENS

MAX_ROWS = 10 * MAX_REQUESTS  # draws one workload makes of a distribution (lengths, shots, samples)
MAX_SEQUENCES = 10 * MAX_REQUESTS  # requests x parallel samples: sequences one run simulates
MAX_HASH_IDS = 500_000_000  # prefix hash ids a workload holds (int64: 4 GiB)
MAX_PREFIX_BLOCKS = 10_000_000  # whole blocks of the distinct shared prefixes (built one by one)
MAX_TOTAL_TOKENS = 10**12  # prompt + output tokens of one run (a year of simulation at 30k tok/s)
MAX_REQUEST_RUNS = 10 * MAX_REQUESTS  # requests x replays of one command (uncertainty, layouts)
MAX_REPLAYS = 10_000  # uncertainty draws
# replicas of every kind in one simulated cluster: each holds its scheduler, block manager and
# queues, ~45 KB (measured: `simulate --replicas 10000` on a 3-request trace peaks at 0.6 GB,
# 1000 at 0.2 GB); 20,000 is ~1 GB (100,000 needed more than 6 GB of address space)
MAX_CLUSTER_REPLICAS = 20_000
MAX_CAPTURE_SIZES = 4096  # CUDA-graph capture sizes of one preset (each <= MAX_TOKENS)
MAX_HOST_GIB = 2.0**20  # host memory one replica may ask for (swap, CPU prefix cache): 1 PiB
MAX_TIME_S = 1e10  # any simulated time (arrivals, waits, latencies): ~300 years; sums stay finite
# Search spaces, counted before the first point exists: each sweep point is a whole simulation
# (seconds to minutes), each plan candidate a rate search of several; 1,000 of either is hours on a
# laptop. A flag raises each default (`sweep --max-points`, `plan --max-candidates`).
DEFAULT_MAX_SWEEP_POINTS = 1_000
DEFAULT_MAX_PLAN_CANDIDATES = 1_000


def require(amount: float, limit: float, what: str, inputs: str, where: str = "budget") -> None:
    """InputError `where: inputs: <what> <amount> is above the limit <limit>` when `amount` (a
    product of the `inputs`) exceeds `limit` or is not finite."""
    if not math.isfinite(amount) or amount > limit:
        raise InputError(where, inputs, f"asks for {_count(amount)} {what}, above the limit of {_count(limit)}; "
                                        "ask for less")


def check_search_space(count: int, made_of: str, what: str, limit: int, where: str, limit_flag: str) -> None:
    """InputError `where: <made_of> make <count> <what>, above <limit_flag> <limit>` before any work
    when a search space is larger than its limit; the count is a product of list lengths (exact)."""
    if count > limit:
        raise InputError(where, None, f"{made_of} make {count:,} {what}, above {limit_flag} {limit:,}; ask for "
                                      f"fewer or raise {limit_flag}")


def check_rate_qps(rate_qps: float, where: str, field: str | None = None, also: str = "") -> None:
    """InputError `where: field: ...` unless 0 < rate_qps <= MAX_RATE_QPS (an arrival rate in req/s);
    `also` names another accepted spelling (", or inf: all at t = 0")."""
    if not (math.isfinite(rate_qps) and 0 < rate_qps <= MAX_RATE_QPS):
        raise InputError(where, field, f"must be a rate in (0, {MAX_RATE_QPS:g}] requests/s (at most one a "
                                       f"nanosecond){also}; got {rate_qps:g}")


def check_layouts(ratios: list[tuple[int, int]], flag: str) -> None:
    """P:D layouts within MAX_CLUSTER_REPLICAS replicas each (a layout is simulated as P + D
    replicas, and compared with an aggregated cluster of as many)."""
    for n_prefill, n_decode in ratios:
        require(n_prefill + n_decode, MAX_CLUSTER_REPLICAS, "replicas", f"{n_prefill}:{n_decode}", flag)


def _count(value: float) -> str:
    if not math.isfinite(value):
        return "infinitely many"
    return f"{value:,.0f}" if value < 1e15 else f"{value:.3g}"


__all__ = ["DEFAULT_MAX_PLAN_CANDIDATES", "DEFAULT_MAX_SWEEP_POINTS",
           "MAX_CAPTURE_SIZES", "MAX_CLUSTER_REPLICAS", "MAX_HASH_IDS", "MAX_HOST_GIB", "MAX_PREFIX_BLOCKS",
           "MAX_RATE_QPS", "MAX_REPLAYS", "MAX_REQUEST_RUNS", "MAX_ROWS", "MAX_SEQUENCES", "MAX_TIME_S", "MAX_TOKENS",
           "MAX_TOTAL_TOKENS", "check_layouts", "check_rate_qps", "check_search_space", "require"]
