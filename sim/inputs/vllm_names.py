"""vLLM's spellings, accepted where infersim has the same meaning (so a vLLM user is at home).

- Config YAML keys may be dashed as in `vllm serve --config` files: `max-num-seqs: 128` is
  `max_num_seqs: 128` (`undash_keys`); both spellings of one key in one file is an error.
- `--enable-prefix-caching` / `--enable-chunked-prefill` (and their `--no-` forms) choose the
  policy as vLLM V1 would schedule: prefix caching on chunked prefill is `radix`, on plain
  continuous batching `radix` with radix_chunked false; chunked prefill alone `chunked`; neither
  `continuous` (`policy_from_vllm_flags`).
- `--request-rate R` is vLLM bench's: Poisson arrivals at R req/s (simulate's `--qps`); `inf` sends
  every request at t = 0 (`all_at_once`).
The CLI flag aliases themselves (`--tensor-parallel-size`, `--num-prompts`, `--kv-cache-dtype`,
`--long-prefill-token-threshold`, `--kv-offloading-size`) are extra names on the typer options.
"""

from __future__ import annotations

import numpy as np

from sim.errors import InputError


def undash_keys(data: dict, where) -> dict:
    """`data` with every top-level (and one nested level of) dashed key spelled with underscores."""
    out: dict = {}
    for key, value in data.items():
        name = key.replace("-", "_") if isinstance(key, str) else key
        if name in out:
            raise InputError(where, str(key), f"given twice (as {name} and {key})")
        out[name] = undash_keys(value, where) if isinstance(value, dict) and name in ("prefill", "decode") else value
    return out


def policy_from_vllm_flags(policy: str | None, prefix_caching: bool | None,
                           chunked_prefill: bool | None) -> tuple[str | None, bool | None]:
    """(policy, radix_chunked) from vLLM's two scheduler switches on top of an explicit --policy
    (None: not given; `continuous` / `chunked` say whether prefill is chunked). A contradiction
    (static with either switch, chunked with --no-enable-chunked-prefill, continuous with
    --enable-chunked-prefill, radix with --no-enable-prefix-caching) is an InputError."""
    if prefix_caching is None and chunked_prefill is None:
        return policy, None
    chunked_by_policy = {"chunked": True, "continuous": False}.get(policy)
    clash = chunked_by_policy is not None and chunked_prefill is not None and chunked_prefill != chunked_by_policy
    if policy == "static" or (policy == "radix" and prefix_caching is False) or clash:
        raise InputError("--enable-prefix-caching/--enable-chunked-prefill", None,
                         f"contradict --policy {policy} (chunked = chunked prefill, continuous = without it, radix = "
                         f"prefix caching)")
    chunked = chunked_prefill if chunked_prefill is not None else chunked_by_policy
    if prefix_caching or policy == "radix":
        return "radix", chunked is not False
    return ("chunked" if chunked is not False else "continuous"), None


def all_at_once(trace):
    """vLLM bench's `--request-rate inf`: the same requests, every one arriving at t = 0."""
    timed = trace.take(np.arange(len(trace)))
    timed.arrival_s = np.zeros(len(trace))
    return timed
