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
