"""Typed, validated simulation config: one YAML file and/or CLI flags (vLLM's knob names)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, PositiveFloat, PositiveInt, model_validator

from sim.errors import InputError
from sim.inputs.budget import MAX_CLUSTER_REPLICAS, MAX_HOST_GIB, MAX_TIME_S
from sim.inputs.engines.apply import fill_from_preset
from sim.inputs.feature_config import FeatureKnobs
from sim.inputs.layout.config import LayoutKnobs
from sim.inputs.lora import LoraKnobs, lora_refusal
from sim.schema import MAX_SEED_EXCLUSIVE, MAX_TOKENS, StrictModel
from sim.yamlio import read_mapping, validate

POLICIES = ("static", "continuous", "chunked", "radix")
MAX_TP = 1024  # GPUs in one tensor-parallel group
MAX_REPLICAS = MAX_CLUSTER_REPLICAS  # replicas behind one router (each a simulated object: sim/inputs/budget.py)
MAX_BLOCK_SIZE = 65_536  # tokens per KV block
MAX_NUM_SEQS = 1_000_000  # sequences in one batch


class SLO(StrictModel):
    """Latency targets a request must meet to count towards goodput (seconds)."""

    ttft_s: PositiveFloat | None = None
    tpot_s: PositiveFloat | None = None
    e2e_s: PositiveFloat | None = None


class EngineConfig(FeatureKnobs, LoraKnobs, LayoutKnobs):
    """Everything one simulation needs besides the workload. Keys equal the CLI flags (dashes -> underscores).

    Ranges: sizes and counts positive; token counts at most MAX_TOKENS; shares in (0, 1]; seed in
    [0, 2**63). `block_size`: with an engine preset, only the sizes that engine starts with (its
    `block_sizes` rule: vLLM V1 multiples of 16, TensorRT-LLM powers of two); without one any positive
    whole number. Sizes are priced by log2 interpolation between the profile's calibrated block sizes
    and clamped outside them."""

    # engine preset (vllm | sglang | trtllm | lmdeploy | a YAML path): fills every knob below that
    # is not given explicitly, and prices the engine's CPU work (sim/inputs/engines). None: no preset; the
    # hardware profile's legacy step_overhead_us stands for the engine.
    engine: str | None = None
    model: str = "llama-3-8b"
    hardware: str = "h100-sxm"
    policy: Literal["static", "continuous", "chunked", "radix"] = "continuous"
    tp: PositiveInt = Field(1, le=MAX_TP)
    replicas: PositiveInt = Field(1, le=MAX_REPLICAS)
    replica_hardware: list[str] | None = None  # heterogeneous cluster: one profile per replica
    router: Literal["round_robin", "random", "least_outstanding", "least_kv", "prefix_affinity"] = "round_robin"
    # not given: as the checkpoint stores its weights (sim.inputs.model.weights.as_stored: `auto` for a quantized
    # checkpoint, bf16 otherwise); any dtype name overrides it for every linear layer
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    # vLLM engine knobs (same names)
    max_num_seqs: PositiveInt = Field(256, le=MAX_NUM_SEQS)
    max_num_batched_tokens: PositiveInt = Field(8192, le=MAX_TOKENS)
    block_size: PositiveInt = Field(16, le=MAX_BLOCK_SIZE)
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    max_model_len: Annotated[int, Field(ge=1, le=MAX_TOKENS)] | None = None  # None: the model's max_position_embeddings
    swap_space: float = Field(4.0, ge=0, le=MAX_HOST_GIB)  # GiB of host memory per GPU for swapped-out KV
    num_gpu_blocks_override: PositiveInt | None = None
    # engine behaviour (None: the preset's value; without a preset: off / nccl)
    num_scheduler_steps: PositiveInt | None = None  # vLLM multi-step scheduling
    enforce_eager: bool | None = None  # True: no CUDA graphs (no batch padding)
    allreduce_kind: Literal["nccl", "custom", "auto"] | None = None
    # infersim knobs
    # chunked/radix: the largest prompt chunk ONE request takes per step (SGLang's
    # chunked_prefill_size, vLLM's long_prefill_token_threshold); None: no cap. The step's token
    # budget shared by decodes and prefill chunks is always max_num_batched_tokens.
    chunk_size: Annotated[int, Field(ge=1, le=MAX_TOKENS)] | None = None
    preemption_mode: Literal["recompute", "swap"] = "recompute"
    # reserve_full: admit a request only if its whole prompt + output fits beside what every admitted
    # request will hold at its end (TensorRT-LLM's GUARANTEED_NO_EVICT capacity scheduler): nothing is
    # ever preempted for blocks. on_demand: blocks as tokens arrive (vLLM, SGLang).
    kv_admission: Literal["on_demand", "reserve_full"] = "on_demand"
    radix_ordering: Literal["fcfs", "lpm"] = "fcfs"  # lpm: longest prefix match first
    radix_chunked: bool = True  # radix on top of chunked prefill (False: on top of continuous)
    watermark: float = Field(0.01, ge=0, lt=1)  # share of blocks kept free when admitting
    batching_window_s: float = Field(0.0, ge=0, le=MAX_TIME_S)  # static: wait this long for a batch to fill
    seed: int = Field(0, ge=0, lt=MAX_SEED_EXCLUSIVE)
    slo: SLO = SLO()
    record_steps: bool = False

    @model_validator(mode="before")
    @classmethod
    def _engine_preset(cls, data):
        """Explicit keys win; the weight dtype defaults to the checkpoint's (before the preset, whose KV
        dtype default depends on it); the preset fills the rest (see sim/inputs/engines/apply.py)."""
        return fill_from_preset(_weights_as_stored(data)) if isinstance(data, dict) else data

    @model_validator(mode="after")
    def _one_profile_per_replica(self) -> EngineConfig:
        if self.replica_hardware is not None and len(self.replica_hardware) != self.replicas:
            raise ValueError(f"replica_hardware must list one profile per replica ({self.replicas})")
        return self

    def hardware_of_replicas(self) -> list[str]:
        return list(self.replica_hardware) if self.replica_hardware is not None else [self.hardware] * self.replicas

    def reads_prefix_ids(self) -> bool:
        """Whether a run reads the workload's prefix hash ids: a radix cache (in any disaggregated
        group too) or the prefix_affinity router."""
        policies = {self.policy, self.prefill.policy, self.decode.policy} if self.is_disaggregated else {self.policy}
        return "radix" in policies or self.router == "prefix_affinity"

    @model_validator(mode="after")
    def _features_fit_policy(self) -> EngineConfig:
        if self.spec_tokens and self.policy == "static":
            raise ValueError("speculative decoding (spec_tokens > 0) needs policy continuous, chunked or radix")
        if self.cpu_cache_gib and self.policy != "radix":
            raise ValueError("cpu_cache_gib is a tier of the radix prefix cache: use policy radix")
        return self

    @model_validator(mode="after")
    def _no_knob_ignored(self) -> EngineConfig:
        """A knob that would have no effect is an error, never silently ignored."""
        if self.engine is None and (self.num_scheduler_steps is not None or self.enforce_eager is not None):
            raise ValueError("num_scheduler_steps and enforce_eager act on an engine preset's CPU cost and CUDA "
                             "graphs: give --engine (vllm, sglang, trtllm, lmdeploy or a preset YAML)")
        if self.radix_ordering == "lpm" and self.policy != "radix":
            raise ValueError("radix_ordering lpm orders by prefix match: it needs policy radix")
        if self.kv_admission == "reserve_full" and self.policy not in ("continuous", "chunked"):
            raise ValueError("kv_admission reserve_full reserves each request's whole KV at admission: it needs "
                             "policy continuous or chunked")
        if self.batching_window_s > 0 and self.policy != "static":
            raise ValueError("batching_window_s is the static policy's batch-forming wait: it needs policy static")
        return self

    @model_validator(mode="after")
    def _block_size_the_engine_takes(self) -> EngineConfig:
        """A block size the preset's engine refuses at start-up is refused here, with the sizes it takes."""
        if self.engine is None:
            return self
        from sim.inputs.engines.preset import load_engine

        preset = load_engine(self.engine)
        rule = preset.block_sizes
        if rule is not None and not rule.allows(self.block_size):
            raise ValueError(f"block_size {self.block_size} is refused by {preset.engine} ({preset.name}): it takes "
                             f"{rule.allowed_text()} (source in the preset's block_sizes)")
        return self

    @model_validator(mode="after")
    def _lora_servable(self) -> EngineConfig:
        """LoRA on a preset, policy or model whose multi-LoRA serving is not modelled: one line."""
        if not self.enable_lora:
            return self
        from sim.inputs.engines.preset import load_engine
        from sim.inputs.model import load_model

        engine = load_engine(self.engine).engine if self.engine is not None else None
        why = lora_refusal(self, load_model(self.model), engine)
        if why is None and self.radix_ordering == "lpm":
            why = "enable_lora with radix_ordering lpm is not modelled yet (the adapter skip keeps FCFS order)"
        if why is not None:
            raise ValueError(why)
        return self

    @model_validator(mode="after")
    def _chunk_fits_budget(self) -> EngineConfig:
        if self.chunk_size is None:
            return self
        if self.policy not in ("chunked", "radix") or (self.policy == "radix" and not self.radix_chunked):
            raise ValueError("chunk_size caps one request's prompt chunk under chunked prefill (policy chunked or "
                             "radix); the per-step token budget is max_num_batched_tokens")
        if self.chunk_size > self.max_num_batched_tokens:
            raise ValueError("chunk_size must not exceed max_num_batched_tokens")
        return self


def _weights_as_stored(data: dict) -> dict:
    """`data` with `weight_dtype` as the model's checkpoint stores it when none (or `auto`) is given
    (sim.inputs.model.weights.as_stored). A model that cannot be read is left to the config's own checks."""
    if data.get("weight_dtype") not in (None, "auto"):
        return data
    from sim.inputs.model import load_model
    from sim.inputs.model.weights import as_stored

    try:
        model = load_model(str(data.get("model") or EngineConfig.model_fields["model"].default))
    except (InputError, OSError, ValueError):
        return data
    return {**data, "weight_dtype": as_stored(model)}


FLAG_NAMES = {"allreduce_kind": "--allreduce"}  # config keys whose flag is not --key-with-dashes


def load_config(path: Path | None, overrides: dict) -> EngineConfig:
    """Config from a YAML file (optional) with CLI overrides on top (None values ignored)."""
    from sim.inputs.vllm_names import undash_keys  # vLLM-style dashed keys (max-num-seqs:) read as underscored

    data = undash_keys(read_mapping(path), path) if path is not None else {}
    flags = {k: v for k, v in overrides.items() if v is not None}
    data.update(flags)
    try:
        return validate(EngineConfig, data, path if path is not None else "command line")
    except InputError as error:
        top, _, sub = (error.field or "").partition(".")
        if error.field is None:  # a check across fields: name the flag its message starts with
            top = error.allowed.split(" ", 1)[0]
        if top in GROUP_KEYS and sub and "." not in sub:  # --prefill-tp -> prefill.tp
            raise InputError(f"--{top}-{sub.replace('_', '-')}", None, error.allowed) from None
        if top in flags:  # the bad value came from a flag: name the flag
            raise InputError(flag_name(top), error.field if sub else None, error.allowed) from None
        raise


GROUP_KEYS = ("prefill", "decode")  # the disaggregated groups' nested knobs (--prefill-* / --decode-*)


def flag_name(key: str) -> str:
    """The command-line flag of a config key (`max_num_seqs` -> `--max-num-seqs`)."""
    return FLAG_NAMES.get(key, f"--{key.replace('_', '-')}")
