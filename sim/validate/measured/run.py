"""One measured serving run, request by request, and the strict number checks its readers share.

Every reader (`vllm_bench`, `aiperf`, `otlp`) turns its file into a `MeasuredRun`: for each
successful request, in the file's own order, its arrival (seconds from the first one), prompt
and output token counts, and the measured TTFT and end-to-end latency. Per-request ITL is
derived the same way for every format and for the simulator: (E2E - TTFT) / (output - 1),
undefined for one-token outputs. Bad numbers raise `InputError` naming file, record and field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sim.errors import InputError
from sim.inputs.budget import MAX_TIME_S
from sim.inputs.workload.trace import Trace
from sim.schema import MAX_TOKENS

MAX_NANOSECONDS = 2**63 - 1  # an int64 timestamp, as OTLP and AIPerf write them


@dataclass(frozen=True)
class MeasuredRun:
    arrival_s: np.ndarray  # float64, seconds from the first request's arrival, in file order
    prompt_tokens: np.ndarray  # int64 >= 1
    output_tokens: np.ndarray  # int64 >= 1
    ttft_s: np.ndarray  # float64 > 0
    e2e_s: np.ndarray  # float64 >= ttft_s
    source: str  # the file it came from
    format: str  # vllm_bench | aiperf | otlp
    n_left_out: int = 0  # records left out: failed, cancelled or warm-up requests

    def __len__(self) -> int:
        return int(self.arrival_s.shape[0])

    @property
    def itl_s(self) -> np.ndarray:
        """Mean inter-token latency per request; NaN where only one token was generated."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.output_tokens > 1, (self.e2e_s - self.ttft_s) / (self.output_tokens - 1), np.nan)

    def order(self) -> np.ndarray:
        """Indices that sort the requests by arrival (stable: ties keep file order)."""
        return np.argsort(self.arrival_s, kind="stable")

    def to_trace(self) -> Trace:
        """The workload as measured: arrivals, prompt and output lengths, sorted by arrival
        (row k of the trace is request `order()[k]` of the file)."""
        idx = self.order()
        return Trace(self.arrival_s[idx], self.prompt_tokens[idx], self.output_tokens[idx],
                     source=f"{self.source} ({self.format}, as measured)")


def build_run(where: str, fmt: str, arrival_s, prompt, output, ttft_s, e2e_s, n_left_out: int = 0,
              arrival_field: str = "arrivals") -> MeasuredRun:
    """Columns -> MeasuredRun; shifts arrivals to start at 0 and checks the cross-field rules."""
    if not len(arrival_s):
        raise InputError(where, None, "holds no successful request to replay")
    span_s = float(max(arrival_s)) - float(min(arrival_s))  # Python floats: an overflow is inf, not a warning
    if not span_s <= MAX_TIME_S:
        raise InputError(where, arrival_field, f"span {span_s:.3g} s from the first to the last request, above the "
                                            f"limit of {MAX_TIME_S:.0e} s")
    arrival = np.asarray(arrival_s, dtype=np.float64)
    run = MeasuredRun(arrival - arrival.min(), np.asarray(prompt, dtype=np.int64),
                      np.asarray(output, dtype=np.int64), np.asarray(ttft_s, dtype=np.float64),
                      np.asarray(e2e_s, dtype=np.float64), str(where), fmt, n_left_out)
    bad = np.flatnonzero(run.e2e_s < run.ttft_s)
    if bad.size:
        i = int(bad[0])
        raise InputError(f"{where}: request {i}", "e2e", f"must be >= its TTFT (got e2e {run.e2e_s[i]!r} s < "
                                                         f"ttft {run.ttft_s[i]!r} s)")
    return run


def number(where: str, field: str, value, minimum: float = 0.0, strict: bool = False,
           maximum: float = math.inf) -> float:
    """A finite real number >= minimum (> minimum when strict) and <= maximum; bools and strings
    are refused."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(where, field, f"must be a number (got {type(value).__name__} {value!r})")
    value = float(value)
    if not math.isfinite(value):
        raise InputError(where, field, f"must be finite (got {value!r})")
    if value < minimum or (strict and value == minimum):
        raise InputError(where, field, f"must be {'>' if strict else '>='} {minimum:g} (got {value!r})")
    if value > maximum:
        raise InputError(where, field, f"must be at most {maximum:g} (got {value!r})")
    return value


def nanoseconds(where: str, field: str, value) -> int:
    """A timestamp in integer nanoseconds (an int, or a decimal string as OTLP JSON writes int64s)."""
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_NANOSECONDS:
        raise InputError(where, field, f"must be a whole number of nanoseconds in [0, 2**63) (got {value!r})")
    return value


def seconds_since_first(nanos: list[int]) -> list[float]:
    """Integer-nanosecond timestamps as seconds after the earliest (exact before the subtraction)."""
    first = min(nanos) if nanos else 0
    return [(n - first) * 1e-9 for n in nanos]


def count(where: str, field: str, value, minimum: int = 1, maximum: int = MAX_TOKENS) -> int:
    """A whole number in [minimum, maximum] (an integral float such as 12.0 is accepted; 12.5 is not)."""
    value_f = number(where, field, value, float(minimum), maximum=float(maximum))
    if value_f != int(value_f):
        raise InputError(where, field, f"must be a whole number (got {value!r})")
    return int(value_f)
