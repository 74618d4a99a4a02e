"""ShareGPT (prompt, output) lengths drawn the way vLLM's benchmarks draw them.

vLLM's `ShareGPTDataset` (vllm/benchmarks/datasets.py; `vllm bench serve --dataset-name sharegpt`)
keeps the conversations with at least two turns, shuffles them with Python's `random` seeded
by `--seed` (default 0), then walks the shuffled list taking the first turn as the prompt and
the second as the reply, tokenizing both with the model's tokenizer, and skips a pair whose
prompt or reply is under 4 tokens, whose prompt is over 1024, or whose sum is over 2048
(`is_valid_sequence`), until it has `--num-prompts`. The reply's length is the request's
output length unless `--sharegpt-output-len` fixes it. vLLM 0.6's `benchmark_throughput.py`
samples the same way (shuffle under `random.seed(args.seed)`, same filter, first turns).

The bundled tables (workloads/README.md) hold, per conversation of the file in the file's order,
the first turn's and the reply's token counts under one tokenizer; `sample_like_vllm` applies
the procedure above to a table. Python's `random.Random(seed).shuffle` is the permutation
`random.seed(seed); random.shuffle(...)` gives, so a table of the same conversations in the same
order draws the same requests as vLLM.
"""

from __future__ import annotations

import random

import numpy as np

from sim.errors import InputError
from sim.inputs.workload.bundled import resolve_workload

MIN_LEN, MAX_PROMPT_LEN, MAX_TOTAL_LEN = 4, 1024, 2048  # vLLM is_valid_sequence defaults
# model name prefix -> bundled first-turn table tokenized with that model family's tokenizer
TOKENIZER_TABLES = (("llama-3", "sharegpt_bench_llama3"), ("mixtral-8x7b", "sharegpt_bench_mistral_v1"),
                    ("mistral-7b", "sharegpt_bench_mistral_v1"))


def table_for_model(model: str) -> str | None:
    """The bundled first-turn table whose tokenizer is `model`'s, or None when none is bundled."""
    key = model.strip().lower()
    return next((table for prefix, table in TOKENIZER_TABLES if key.startswith(prefix)), None)


def load_table(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(prompt_tokens, reply_tokens) of a bundled first-turn table, in the dataset's order."""
    from sim.inputs.workload.read_trace import load_trace

    trace = load_trace(resolve_workload(name), seed=0)
    return trace.prompt_tokens, trace.output_tokens


def sample_like_vllm(prompt: np.ndarray, reply: np.ndarray, n_requests: int, seed: int = 0,
                     fixed_output_len: int | None = None, where: str = "sharegpt") -> tuple[np.ndarray, np.ndarray]:
    """The first `n_requests` valid pairs of the table shuffled as vLLM shuffles it (see module
    docstring); InputError when the table has fewer valid pairs (vLLM would oversample)."""
    order = list(range(len(prompt)))
    random.Random(seed).shuffle(order)
    taken_prompt, taken_output = [], []
    for i in order:
        if len(taken_prompt) == n_requests:
            break
        p = int(prompt[i])
        o = int(reply[i]) if fixed_output_len is None else fixed_output_len
        too_short = p < MIN_LEN or (fixed_output_len is None and o < MIN_LEN)
        if too_short or p > MAX_PROMPT_LEN or p + o > MAX_TOTAL_LEN:
            continue
        taken_prompt.append(p)
        taken_output.append(o)
    if len(taken_prompt) < n_requests:
        raise InputError(where, "num_requests", f"at most {len(taken_prompt)} valid ShareGPT pairs in the bundled "
                                                f"table (asked for {n_requests})")
    return np.array(taken_prompt, dtype=np.int64), np.array(taken_output, dtype=np.int64)
