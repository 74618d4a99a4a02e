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


# vLLM --quantization methods that name a checkpoint's own format: served as stored (`auto`) when the
# checkpoint is in that format; `fp8` on a bf16 checkpoint is vLLM's online FP8 of every linear layer
QUANTIZATION_DTYPES = {"fp8": "fp8", "mxfp4": "mxfp4", "modelopt_fp4": "nvfp4", "awq": "int4", "gptq": "int4"}
KV_CACHE_DTYPES = {"auto": None, "fp8": "fp8", "fp8_e4m3": "fp8", "bfloat16": "bf16", "float16": "fp16"}


def weight_dtype_from_quantization(method: str, model) -> str:
    """infersim's weight dtype for vLLM's `--quantization METHOD` on `model` (a ModelSpec): `auto` when
    the checkpoint already stores weights in that method's dtype (vLLM then loads it as stored), `fp8`
    for online FP8 of an unquantized checkpoint; anything else is an InputError."""
    dtype = QUANTIZATION_DTYPES.get(method.strip().lower())
    if dtype is None:
        raise InputError("--quantization", method, f"one of {', '.join(QUANTIZATION_DTYPES)} (or --weight-dtype)")
    if dtype in (model.weight_dtypes or {}).values():
        return "auto"
    if dtype == "fp8" and model.weight_dtypes is None:
        return "fp8"
    stored = sorted(set((model.weight_dtypes or {}).values()) - {"bf16"}) or ["bf16"]
    raise InputError("--quantization", method, f"{model.name}'s checkpoint stores {', '.join(stored)} weights: vLLM "
                                               f"loads it with that method (the default); only fp8 quantizes a bf16 "
                                               f"checkpoint online")


def kv_dtype_from_vllm(value: str | None) -> str | None:
    """infersim's KV dtype for vLLM's `--kv-cache-dtype` value (`fp8_e4m3` = `fp8`; `auto` = the
    default, None); infersim's own names pass through for the config to judge."""
    if value is None:
        return None
    key = value.strip().lower()
    if key == "fp8_e5m2":
        raise InputError("--kv-cache-dtype", value, "fp8_e5m2 is not modelled apart from e4m3; use fp8 (fp8_e4m3)")
    return KV_CACHE_DTYPES.get(key, value)


SPEC_METHODS = {"mtp": "mtp", "deepseek_mtp": "mtp", "eagle": "heads", "eagle3": "heads", "medusa": "heads",
                "draft_model": "draft"}


def speculative_config_knobs(text: str) -> dict:
    """Config keys for vLLM's `--speculative-config JSON`: `num_speculative_tokens` -> spec_tokens,
    `method` -> spec_method (mtp / deepseek_mtp: the model's MTP layers; eagle, eagle3, medusa: heads;
    draft_model, or a `model` without a method: a draft model, `model` naming a bundled spec or its
    HF name). Any other key (e.g. ngram's prompt_lookup_*) changes what is simulated and is not
    modelled: an InputError, as is a method outside SPEC_METHODS."""
    import json

    from sim.yamlio import loads_json

    flag = "--speculative-config"
    try:
        spec = loads_json(text, flag)  # bounded in depth; a key given twice is refused by name
    except json.JSONDecodeError as exc:
        raise InputError(flag, None, f"must be a JSON object, e.g. '{{\"method\":\"mtp\",\"num_speculative_tokens\""
                                     f":1}}' ({exc.msg})") from None
    if not isinstance(spec, dict):
        raise InputError(flag, None, "must be a JSON object")
    unknown = sorted(set(spec) - {"method", "model", "num_speculative_tokens"})
    if unknown:
        raise InputError(flag, unknown[0], "not modelled; the keys read are method, model, num_speculative_tokens")
    tokens = spec.get("num_speculative_tokens")
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 1:
        raise InputError(flag, "num_speculative_tokens", f"a whole number >= 1; got {tokens!r}")
    method = spec.get("method") or ("draft_model" if spec.get("model") else None)
    if method not in SPEC_METHODS:
        raise InputError(flag, "method", f"one of {', '.join(SPEC_METHODS)}; got {method!r}")
    knobs = {"spec_tokens": tokens, "spec_method": SPEC_METHODS[method]}
    if knobs["spec_method"] == "draft":
        knobs["spec_draft_model"] = _bundled_name(str(spec.get("model") or ""), flag)
    return knobs


def _bundled_name(model: str, flag: str) -> str:
    """A bundled spec by its name or its HF name, or the text as given (a spec path)."""
    from sim.inputs.model import bundled_models, load_model

    for name in bundled_models():
        if model in (name, load_model(name).hf_name):
            return name
    if not model:
        raise InputError(flag, "model", "a draft model needs `model` (a bundled spec, its HF name or a spec path)")
    return model
