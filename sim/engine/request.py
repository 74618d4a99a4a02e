"""Per-request state for a whole run, as a struct of numpy arrays (one row per request).

Token counters follow vLLM v1: `n_computed` tokens have their KV in the cache, `n_tokens` tokens
exist (prompt + generated). Chunked prefill schedules fewer than `n_tokens - n_computed`; a prefix
hit raises `n_computed` at admission. A request is done when it generated `output_tokens` tokens.
"""

from __future__ import annotations

import enum

import numpy as np

from sim.inputs.workload.trace import Trace


class Status(enum.IntEnum):
    PENDING = 0  # not arrived yet
    WAITING = 1
    RUNNING = 2
    SWAPPED = 3
    FINISHED = 4
    REJECTED = 5


# the columns a run writes (the others follow from the trace and max_model_len; a closed loop and
# parallel samples' forks write arrival_s)
RUN_STATE_COLUMNS = ("arrival_s", "status", "n_computed", "n_tokens", "cached_tokens", "host_cached_tokens",
                     "first_token_s", "last_token_s", "finish_s", "scheduled_s", "preemptions", "preempted_s",
                     "kv_transfer_s", "replica", "energy_prefill_j", "energy_decode_j")


class RequestTable:
    """Columns of every sequence of a run; schedulers index them by row id.

    Rows 0..n_requests-1 are the trace's requests. A request with parallel sampling n > 1 gets
    n - 1 extra sample rows after them (`sample_of[row]` names the request a row belongs to);
    they never arrive on their own: they fork from their request when its prefill completes.
    """

    def __init__(self, trace: Trace, max_model_len: int):
        self.trace = trace
        self.n_requests = len(trace)
        samples = trace.samples()
        extra = np.repeat(np.arange(self.n_requests), samples - 1)
        self.sample_of = np.concatenate([np.arange(self.n_requests), extra]).astype(np.int64)
        self.children: dict[int, list[int]] = {}
        for row, parent in enumerate(extra.tolist(), start=self.n_requests):
            self.children.setdefault(parent, []).append(row)
        n = self.sample_of.shape[0]
        self.arrival_s = trace.arrival_s[self.sample_of].copy()
        self.prompt_tokens = trace.prompt_tokens[self.sample_of].copy()
        wanted = trace.output_tokens[self.sample_of]
        # like vLLM, generation stops at max_model_len
        self.output_tokens = np.maximum(np.minimum(wanted, max_model_len - self.prompt_tokens), 1)
        self.final_tokens = self.prompt_tokens + self.output_tokens  # n_tokens once done
        self.status = np.full(n, Status.PENDING, dtype=np.int8)
        self.n_computed = np.zeros(n, dtype=np.int64)
        self.n_tokens = self.prompt_tokens.copy()
        self.cached_tokens = np.zeros(n, dtype=np.int64)  # prompt tokens served by the prefix cache
        self.host_cached_tokens = np.zeros(n, dtype=np.int64)  # of those, loaded from the host-memory tier
        self.first_token_s = np.full(n, np.nan)
        self.last_token_s = np.full(n, np.nan)
        self.finish_s = np.full(n, np.nan)
        self.scheduled_s = np.full(n, np.nan)  # first time it was scheduled (queue delay ends)
        self.preemptions = np.zeros(n, dtype=np.int64)
        self.preempted_s = np.zeros(n)  # time spent preempted (waiting again or swapped)
        self.kv_transfer_s = np.zeros(n)  # disaggregated: prefill end -> KV on a decode replica
        self.replica = np.zeros(n, dtype=np.int64)  # set when the router places the request
        # joules of the steps that computed its prompt / its output tokens (sim/engine/energy.py; 0 without)
        self.energy_prefill_j = np.zeros(n)
        self.energy_decode_j = np.zeros(n)
        self.reject_reason: dict[int, str] = {}

    def __len__(self) -> int:
        return self.n_requests

    def rows_of(self, rid: int) -> list[int]:
        """The request's own row and its sample rows."""
        return [rid, *self.children.get(rid, ())]

    def is_request_done(self, row: int) -> bool:
        """Every sample of the request that `row` belongs to has ended."""
        rows = self.rows_of(int(self.sample_of[row]))
        return all(self.status[r] in (Status.FINISHED, Status.REJECTED) for r in rows)

    def reject(self, rid: int, reason: str, now_s: float) -> None:
        for row in self.rows_of(rid):
            self.status[row] = Status.REJECTED
            self.finish_s[row] = now_s
        self.reject_reason[rid] = reason
