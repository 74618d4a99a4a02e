"""The serving front end around the engine core: what a client sees on top of the engine's own times.

An engine's API server (vLLM's OpenAI server, SGLang's tokenizer manager) parses the request,
tokenises the prompt, passes it to the engine core over IPC, and on the way back detokenises each
token and writes it to the HTTP stream. A preset's `overhead.frontend_ms` is that path per request:
every token reaches the client `frontend_ms` later than the engine core produced it, so TTFT and E2E
grow by it and the gaps between tokens do not. Open loop, the engine's schedule does not change
(the whole request is shifted); a closed-loop client sends its next request that much later.
"""

from __future__ import annotations

import numpy as np

from sim.engine.request import RequestTable


def shift_to_client(table: RequestTable, frontend_s: float, attribution=None) -> None:
    """Move every finished row's token times by `frontend_s` (mutates the table; books the part)."""
    if frontend_s <= 0:
        return
    done = np.flatnonzero(np.isfinite(table.finish_s))
    table.first_token_s[done] += frontend_s
    table.last_token_s[done] += frontend_s
    table.finish_s[done] += frontend_s
    if attribution is not None:
        attribution.book_frontend(done[done < table.n_requests], frontend_s)


def tokenized_arrivals_s(arrival_s: np.ndarray, prompt_tokens: np.ndarray, s_per_token: float) -> np.ndarray:
    """When each request (in arrival order) leaves ONE tokenizer process that takes requests first come, first
    served and spends `s_per_token` per prompt token: done_i = max(arrival_i, done_{i-1}) + cost_i. So a burst
    queues at the tokenizer (SGLang's single tokenizer manager) and the engine core sees it spread out.
    Closed form: done_i = C_i + max_{j<=i}(arrival_j - C_{j-1}), C the running sum of the costs."""
    cost_s = np.asarray(prompt_tokens, dtype=float) * s_per_token
    total_s = np.cumsum(cost_s)
    return total_s + np.maximum.accumulate(np.asarray(arrival_s, dtype=float) - (total_s - cost_s))


class Tokenizer:
    """The tokenizer in front of the engine core (open loop): during the run the table's arrival times are
    when requests reach the engine core; afterwards they are the client's again and the difference is
    booked as the `tokenize` part of the latency attribution (queueing at the tokenizer included)."""

    def __init__(self, table: RequestTable, s_per_token: float):
        self.table, self.client_arrival_s = table, table.arrival_s.copy()
        n = table.n_requests
        engine_s = tokenized_arrivals_s(self.client_arrival_s[:n], table.prompt_tokens[:n], s_per_token)
        table.arrival_s[:] = engine_s[table.sample_of]  # a request's extra samples arrive with it

    def restore(self, attribution=None) -> None:
        """Give the table back the client's arrival times; book each row's tokenizer time."""
        waited_s = self.table.arrival_s - self.client_arrival_s
        self.table.arrival_s[:] = self.client_arrival_s
        if attribution is not None:
            rows = np.arange(self.table.n_requests)
            attribution.book_tokenize(rows, waited_s[rows])


def shift_by_tokenize(table: RequestTable, s_per_token: float, attribution=None) -> None:
    """Closed loop: each finished row's token times move by its own prompt's tokenisation time (not queued:
    a closed loop's clients wait for their answers, so the tokenizer rarely sees a burst; not modelled)."""
    if s_per_token <= 0:
        return
    done = np.flatnonzero(np.isfinite(table.finish_s))
    delay_s = table.prompt_tokens[done] * s_per_token
    table.first_token_s[done] += delay_s
    table.last_token_s[done] += delay_s
    table.finish_s[done] += delay_s
    if attribution is not None:
        own = done < table.n_requests
        attribution.book_tokenize(done[own], delay_s[own])
