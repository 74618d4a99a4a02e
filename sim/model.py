"""Model architecture specs (bundled YAML or a Hugging Face config.json) and what derives from them."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, PositiveInt, model_validator

from sim.errors import InputError
from sim.paths import model_specs_dir
from sim.schema import MAX_TOKENS, StrictModel
from sim.yamlio import read_mapping, validate


class MoE(StrictModel):
    n_experts: PositiveInt
    experts_per_token: PositiveInt

    @model_validator(mode="after")
    def _top_k_within_experts(self) -> MoE:
        if self.experts_per_token > self.n_experts:
            raise ValueError(f"experts_per_token ({self.experts_per_token}) must not exceed "
                             f"n_experts ({self.n_experts})")
        return self


class ModelSpec(StrictModel):
    """An architecture. Relations checked: n_heads is a multiple of n_kv_heads (GQA groups are whole)."""

    name: str
    hf_name: str = ""
    n_layers: PositiveInt
    hidden_size: PositiveInt
    n_heads: PositiveInt
    n_kv_heads: PositiveInt
    head_dim: PositiveInt
    intermediate_size: PositiveInt
    vocab_size: PositiveInt
    max_position_embeddings: int = Field(ge=1, le=MAX_TOKENS)
    mlp: Literal["gated", "plain"] = "gated"
    tie_word_embeddings: bool = False
    qkv_bias: bool = False
    moe: MoE | None = None
    provenance: str = ""

    @model_validator(mode="after")
    def _whole_kv_groups(self) -> ModelSpec:
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads ({self.n_heads}) must be a multiple of n_kv_heads ({self.n_kv_heads})")
        return self

    # ---- derived quantities (element counts; multiply by a dtype's bytes) ----
    @property
    def mlp_matrices(self) -> int:
        return 3 if self.mlp == "gated" else 2

    @property
    def attn_params_per_layer(self) -> int:
        qkv = self.hidden_size * (self.n_heads + 2 * self.n_kv_heads) * self.head_dim
        out = self.n_heads * self.head_dim * self.hidden_size
        return qkv + out

    @property
    def expert_params(self) -> int:
        """Parameters of one MLP (one expert for MoE)."""
        return self.mlp_matrices * self.hidden_size * self.intermediate_size

    @property
    def n_experts(self) -> int:
        return self.moe.n_experts if self.moe else 1

    @property
    def n_active_experts(self) -> int:
        return self.moe.experts_per_token if self.moe else 1

    @property
    def embedding_params(self) -> int:
        tables = 1 if self.tie_word_embeddings else 2
        return tables * self.vocab_size * self.hidden_size

    def total_params(self) -> int:
        router = self.hidden_size * self.n_experts if self.moe else 0
        per_layer = self.attn_params_per_layer + self.n_experts * self.expert_params + router
        return self.n_layers * per_layer + self.embedding_params

    def active_params_per_token(self) -> int:
        per_layer = self.attn_params_per_layer + self.n_active_experts * self.expert_params
        return self.n_layers * per_layer + self.embedding_params

    def kv_elements_per_token(self) -> int:
        """K and V elements cached per token, whole model (all layers, all KV heads)."""
        return 2 * self.n_layers * self.n_kv_heads * self.head_dim

    def check_tp(self, tp: int) -> None:
        """Tensor parallelism must split the heads evenly (KV heads may replicate when tp > kv)."""
        if tp < 1 or self.n_heads % tp:
            raise InputError("--tp", None, f"must divide n_heads={self.n_heads} of {self.name}")
        if (tp > self.n_kv_heads and tp % self.n_kv_heads) or (tp < self.n_kv_heads and self.n_kv_heads % tp):
            raise InputError("--tp", None, f"must divide or be a multiple of n_kv_heads={self.n_kv_heads}")

    def kv_heads_per_gpu(self, tp: int) -> int:
        """KV heads each GPU stores: heads are split, or replicated once tp exceeds them."""
        return max(1, self.n_kv_heads // tp)


def bundled_models() -> list[str]:
    return sorted(p.stem for p in model_specs_dir().glob("*.yaml"))


@lru_cache(maxsize=64)
def load_model(name_or_path: str) -> ModelSpec:
    """A bundled spec by name (`llama-3-8b`), a user's YAML, or a HF `config.json` path (offline)."""
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml", ".json"):
        path = model_specs_dir() / f"{name_or_path}.yaml"
        if not path.is_file():
            allowed = ", ".join(bundled_models())
            raise InputError("--model", None, f"unknown model {name_or_path!r}; bundled: {allowed}")
    elif not path.is_file():
        raise InputError(path, None, "file not found")
    data = read_mapping(path)
    if path.suffix == ".json":
        data = from_hf_config(data, path)
    return validate(ModelSpec, data, path)


_HF_REQUIRED = ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size", "vocab_size")


def _positive_int(config: dict, key: str, path: Path) -> int:
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InputError(path, key, f"must be a positive integer (a Hugging Face config.json field); got {value!r}")
    return value


def from_hf_config(config: dict, path: Path) -> dict:
    """Map a Hugging Face config.json onto ModelSpec fields (Llama/Mistral/Qwen2/Mixtral family).

    Absent `num_key_value_heads` means multi-head attention (= heads); present, it must be a
    positive integer (0 is an error, never silently MHA). Without `head_dim`, hidden_size must
    split evenly into the heads."""
    for key in _HF_REQUIRED:
        if key not in config:
            raise InputError(path, key, "required positive integer (a Hugging Face config.json field)")
        _positive_int(config, key, path)
    n_heads = config["num_attention_heads"]
    for key in ("num_key_value_heads", "head_dim", "max_position_embeddings", "num_local_experts",
                "num_experts_per_tok"):
        if config.get(key) is not None:
            _positive_int(config, key, path)
    if config.get("head_dim") is None and config["hidden_size"] % n_heads:
        raise InputError(path, "hidden_size", f"must be a multiple of num_attention_heads ({n_heads}) "
                                              "when head_dim is not given")
    head_dim = config.get("head_dim") or config["hidden_size"] // n_heads
    n_experts = config.get("num_local_experts")
    return {
        "name": config.get("_name_or_path") or path.parent.name or path.stem,
        "hf_name": config.get("_name_or_path", ""),
        "n_layers": config["num_hidden_layers"],
        "hidden_size": config["hidden_size"],
        "n_heads": n_heads,
        "n_kv_heads": config.get("num_key_value_heads") or n_heads,
        "head_dim": head_dim,
        "intermediate_size": config["intermediate_size"],
        "vocab_size": config["vocab_size"],
        "max_position_embeddings": config.get("max_position_embeddings") or 4096,
        "mlp": "gated" if config.get("hidden_act", "silu") in ("silu", "swiglu", "gelu_pytorch_tanh") else "plain",
        "tie_word_embeddings": bool(config.get("tie_word_embeddings", False)),
        "qkv_bias": bool(config.get("attention_bias", config.get("model_type") == "qwen2")),
        "moe": {"n_experts": n_experts, "experts_per_token": config.get("num_experts_per_tok") or 2}
        if n_experts
        else None,
        "provenance": f"Hugging Face config.json at {path}",
    }
