"""Reading one Hugging Face `config.json`: typed getters that remember what they read, and the
refusal of any field that changes the math and that the family's reader did not model."""

from __future__ import annotations

from pathlib import Path

from sim.errors import InputError
from sim.schema import plausible_check

# Fields that change parameter counts, KV size or cost wherever they appear. A family reader
# reads the ones it models; one present (not null / false / 0 / empty) and unread is refused.
MATH_FIELDS = frozenset({
    "num_local_experts", "num_experts", "n_routed_experts", "num_experts_per_tok", "experts_per_token",
    "moe_intermediate_size", "shared_expert_intermediate_size", "n_shared_experts", "first_k_dense_replace",
    "moe_layer_freq", "decoder_sparse_step", "mlp_only_layers", "interleave_moe_layer_step", "moe_layers",
    "intermediate_size_mlp", "kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
    "sliding_window", "use_sliding_window", "max_window_layers", "layer_types", "sliding_window_pattern",
    "attention_chunk_size", "no_rope_layers", "num_nextn_predict_layers", "quantization_config",
    "text_config", "vision_config", "ep_size", "index_topk", "index_n_heads", "compress_ratios",
    "full_attention_interval", "layers_block_type", "linear_num_value_heads", "cross_attention_layers",
    "num_experts_per_token", "moe_num_experts", "zero_expert_num", "o_lora_rank",
})

# config.json counts and sizes -> their entry of the plausible-range table (sim/specs/plausible.yaml),
# checked as they are read: a config with 10^9 layers is refused before any list of layers is built
PLAUSIBLE_KEYS = {
    "num_hidden_layers": "layers", "hidden_size": "hidden_size", "num_attention_heads": "heads",
    "num_key_value_heads": "heads", "head_dim": "head_dim", "vocab_size": "vocab", "intermediate_size": "ffn_width",
    "moe_intermediate_size": "ffn_width", "shared_expert_intermediate_size": "ffn_width",
    "intermediate_size_mlp": "ffn_width", "n_routed_experts": "experts", "num_local_experts": "experts",
    "num_experts": "experts", "num_experts_per_tok": "experts", "experts_per_token": "experts",
    "n_shared_experts": "shared_experts",
    "sliding_window": "context_tokens", "attention_chunk_size": "context_tokens", "kv_lora_rank": "lora_rank",
    "q_lora_rank": "lora_rank", "qk_nope_head_dim": "head_dim", "qk_rope_head_dim": "head_dim",
    "v_head_dim": "head_dim", "num_nextn_predict_layers": "extra_layers",
}


class HFConfig:
    """A config.json mapping plus the keys read from it. `path` names the file in every error."""

    def __init__(self, data: dict, path: Path, prefix: str = ""):
        self.data, self.path, self.prefix = data, path, prefix
        self.read: set[str] = set()

    def field(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def error(self, key: str, allowed: str) -> InputError:
        return InputError(self.path, self.field(key), allowed)

    def has(self, key: str) -> bool:
        self.read.add(key)
        return self.data.get(key) not in (None, False, 0, [], {})

    def raw(self, key: str, default=None):
        self.read.add(key)
        value = self.data.get(key)
        return default if value is None else value

    def int(self, key: str, default: int | None = None, minimum: int = 1) -> int | None:
        """A whole number >= minimum; `default` when absent or null; required when default is None."""
        self.read.add(key)
        value = self.data.get(key)
        if value is None:
            if default is None:
                raise self.error(key, f"required integer >= {minimum} (a Hugging Face config.json field)")
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            kind = "positive integer" if minimum == 1 else f"integer >= {minimum}"
            raise self.error(key, f"must be a {kind} (a Hugging Face config.json field); got {value!r}")
        problem = plausible_check(PLAUSIBLE_KEYS[key], value) if key in PLAUSIBLE_KEYS and value else None
        if problem is not None:
            raise self.error(key, problem)
        return value

    def opt_int(self, key: str, minimum: int = 1) -> int | None:
        self.read.add(key)
        return None if self.data.get(key) is None else self.int(key, minimum=minimum)

    def int_list(self, key: str, n: int | None = None, allowed: tuple = ()) -> list:
        self.read.add(key)
        value = self.data.get(key)
        if value is None:
            return []
        ok = isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)
        if allowed:
            ok = isinstance(value, list) and all(v in allowed for v in value)
        if not ok or (n is not None and len(value) != n):
            what = f"one of {', '.join(map(str, allowed))}" if allowed else "whole numbers >= 0"
            length = f" with {n} entries" if n is not None else ""
            raise self.error(key, f"must be a list of {what}{length}; got {value!r}")
        return value

    def expect(self, key: str, modelled, why: str) -> None:
        """Refuse a value other than the modelled one(s) (absent/null counts as modelled)."""
        self.read.add(key)
        value = self.data.get(key)
        choices = modelled if isinstance(modelled, tuple) else (modelled,)
        if value is not None and value not in choices:
            shown = " or ".join(repr(c) for c in choices)
            raise self.error(key, f"{value!r} is not modelled ({why}); infersim models {shown}")

    def refuse_unread(self, model_type: str) -> None:
        """One line naming the first math-changing field the reader of `model_type` did not model."""
        for key in sorted(MATH_FIELDS - self.read):
            if self.data.get(key) not in (None, False, 0, [], {}):
                raise self.error(key, f"changes the model's math and is not modelled for model_type "
                                      f"{model_type!r} (refused rather than read as a dense model)")


def base_fields(cfg: HFConfig, *, qkv_bias_default: bool = False) -> dict:
    """Fields every decoder family shares (Llama-style attention and a dense MLP width)."""
    for key in ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size"):
        cfg.int(key)
    n_heads = cfg.data["num_attention_heads"]
    head_dim = cfg.opt_int("head_dim")
    if head_dim is None and cfg.data["hidden_size"] % n_heads:
        raise cfg.error("hidden_size", f"must be a multiple of num_attention_heads ({n_heads}) when head_dim "
                                       "is not given")
    act = cfg.raw("hidden_act", "silu")
    return {
        "n_layers": cfg.data["num_hidden_layers"],
        "hidden_size": cfg.data["hidden_size"],
        "n_heads": n_heads,
        "n_kv_heads": cfg.int("num_key_value_heads", n_heads),
        "head_dim": head_dim or cfg.data["hidden_size"] // n_heads,
        "vocab_size": cfg.data["vocab_size"],
        "max_position_embeddings": cfg.int("max_position_embeddings", 4096),
        "mlp": "gated" if act in ("silu", "swiglu", "gelu_pytorch_tanh") else "plain",
        "tie_word_embeddings": bool(cfg.raw("tie_word_embeddings", False)),
        "qkv_bias": bool(cfg.raw("attention_bias", qkv_bias_default)),
    }


def moe_top_k(cfg: HFConfig, key: str = "num_experts_per_tok", default: int | None = None) -> int:
    return cfg.int(key, default)


def shared_expert_moe(cfg: HFConfig, n_layers: int) -> dict:
    """The MoE block of DeepSeek-style configs (DeepSeek-V2/V3, Kimi-K2, GLM-4.5): `n_routed_experts`
    of width `moe_intermediate_size`, top `num_experts_per_tok`, `n_shared_experts` always on, the
    first `first_k_dense_replace` layers dense."""
    first_dense = cfg.int("first_k_dense_replace", 0, minimum=0)
    return {
        "n_experts": cfg.int("n_routed_experts"), "experts_per_token": cfg.int("num_experts_per_tok"),
        "expert_intermediate_size": cfg.int("moe_intermediate_size"),
        "n_shared_experts": cfg.int("n_shared_experts", 0, minimum=0),
        "dense_layers": list(range(min(first_dense, n_layers))),
    }
