"""Per-request state for a whole run, as a struct of numpy arrays (one row per request).

Token counters follow vLLM v1: `n_computed` tokens have their KV in the cache, `n_tokens` tokens
exist (prompt + generated). Chunked prefill schedules fewer than `n_tokens - n_computed`; a prefix
hit raises `n_computed` at admission. A request is done when it generated `output_tokens` tokens.
"""

from __future__ import annotations

import enum

import numpy as np

from sim.trace import Trace


class Status(enum.IntEnum):
    PENDING = 0  # not arrived yet
    WAITING = 1
    RUNNING = 2
    SWAPPED = 3
    FINISHED = 4
    REJECTED = 5


class RequestTable:
    """Columns of every request of a run; schedulers index them by request id (row number)."""

    def __init__(self, trace: Trace, max_model_len: int):
        n = len(trace)
        self.trace = trace
        self.arrival_s = trace.arrival_s.copy()
        self.prompt_tokens = trace.prompt_tokens.copy()
        wanted = trace.output_tokens.copy()
        # like vLLM, generation stops at max_model_len
        self.output_tokens = np.maximum(np.minimum(wanted, max_model_len - self.prompt_tokens), 1)
        self.status = np.full(n, Status.PENDING, dtype=np.int8)
        self.n_computed = np.zeros(n, dtype=np.int64)
        self.n_tokens = self.prompt_tokens.copy()
        self.cached_tokens = np.zeros(n, dtype=np.int64)  # prompt tokens served by the prefix cache
        self.first_token_s = np.full(n, np.nan)
        self.last_token_s = np.full(n, np.nan)
        self.finish_s = np.full(n, np.nan)
        self.scheduled_s = np.full(n, np.nan)  # first time it was scheduled (queue delay ends)
        self.preemptions = np.zeros(n, dtype=np.int64)
        self.preempted_s = np.zeros(n)  # time spent preempted (waiting again or swapped)
        self.replica = np.full(n, -1, dtype=np.int64)
        self.reject_reason: dict[int, str] = {}

    def __len__(self) -> int:
        return int(self.arrival_s.shape[0])

    def generated(self, rid: int) -> int:
        return int(self.n_tokens[rid] - self.prompt_tokens[rid])

    def reject(self, rid: int, reason: str, now_s: float) -> None:
        self.status[rid] = Status.REJECTED
        self.finish_s[rid] = now_s
        self.reject_reason[rid] = reason
