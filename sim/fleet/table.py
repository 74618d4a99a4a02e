"""A request table whose rows are reused: memory follows the requests in flight, not the day.

Schedulers index `sim.engine.request.RequestTable` columns by row; this table has the same columns over
a pool of slots. A request takes a free slot when it arrives (`admit`) and gives it back once its
outcome is tallied (`release`); the pool doubles when every slot is in flight (only between
events, never inside a scheduler call, so no scheduler holds an outdated column). One sample per
request (parallel sampling is refused by the fleet).
"""

from __future__ import annotations

import numpy as np

from sim.engine.request import Status

_FLOAT_NAN = ("first_token_s", "last_token_s", "finish_s", "scheduled_s")
_FLOAT_ZERO = ("arrival_s", "preempted_s", "kv_transfer_s")
_INT_ZERO = ("prompt_tokens", "output_tokens", "final_tokens", "n_computed", "n_tokens", "cached_tokens",
             "host_cached_tokens", "preemptions", "replica")


class SlotTable:
    def __init__(self, max_model_len: int, capacity: int = 4096):
        self.max_model_len = max_model_len
        self.children: dict[int, list[int]] = {}
        self.reject_reason: dict[int, str] = {}
        self.n_requests = 0  # rows (the pool's size)
        self.peak_in_flight = 0  # the most rows ever taken at once
        self._free: list[int] = []
        self._grow(capacity)

    def _grow(self, capacity: int) -> None:
        old = self.n_requests
        for name in _FLOAT_NAN:
            self._extend(name, np.full(capacity - old, np.nan))
        for name in _FLOAT_ZERO:
            self._extend(name, np.zeros(capacity - old))
        for name in _INT_ZERO:
            self._extend(name, np.zeros(capacity - old, dtype=np.int64))
        self._extend("status", np.full(capacity - old, Status.PENDING, dtype=np.int8))
        self.sample_of = np.arange(capacity, dtype=np.int64)
        self._free.extend(range(capacity - 1, old - 1, -1))  # lowest slot first
        self.n_requests = capacity

    def _extend(self, name: str, tail: np.ndarray) -> None:
        head = getattr(self, name, None)
        setattr(self, name, tail if head is None else np.concatenate([head, tail]))

    def __len__(self) -> int:
        return self.n_requests

    @property
    def n_in_flight(self) -> int:
        return self.n_requests - len(self._free)

    def admit(self, arrival_s: float, prompt_tokens: int, output_tokens: int) -> int:
        """A fresh row for an arriving request (output capped at max_model_len, as RequestTable does)."""
        if not self._free:
            self._grow(2 * self.n_requests)
        row = self._free.pop()
        self.peak_in_flight = max(self.peak_in_flight, self.n_requests - len(self._free))
        self.arrival_s[row] = arrival_s
        self.prompt_tokens[row] = prompt_tokens
        self.output_tokens[row] = max(min(output_tokens, self.max_model_len - prompt_tokens), 1)
        self.final_tokens[row] = prompt_tokens + self.output_tokens[row]
        self.restart(row)
        return row

    def restart(self, row: int) -> None:
        """Back to not started (a retry after its replica failed): nothing computed, no times."""
        self.status[row] = Status.PENDING
        self.n_tokens[row] = self.prompt_tokens[row]
        self.n_computed[row] = self.cached_tokens[row] = self.host_cached_tokens[row] = 0
        self.preemptions[row] = 0
        self.preempted_s[row] = self.kv_transfer_s[row] = 0.0
        for name in _FLOAT_NAN:
            getattr(self, name)[row] = np.nan

    def release(self, row: int) -> None:
        self.reject_reason.pop(row, None)
        self._free.append(row)

    # RequestTable's API that schedulers use
    def rows_of(self, rid: int) -> list[int]:
        return [rid]

    def is_request_done(self, row: int) -> bool:
        return self.status[row] in (Status.FINISHED, Status.REJECTED)

    def reject(self, rid: int, reason: str, now_s: float) -> None:
        self.status[rid] = Status.REJECTED
        self.finish_s[rid] = now_s
        self.reject_reason[rid] = reason
