"""Config knobs of the beyond-one-engine features (speculative decoding, the host-memory prefix
tier, disaggregated prefill/decode). `EngineConfig` inherits them; all are off by default."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveFloat, PositiveInt, model_validator

from sim.inputs.budget import MAX_CLUSTER_REPLICAS, MAX_HOST_GIB, MAX_TIME_S
from sim.inputs.layout.config import engine_names_to_keys  # a group's data_parallel_size: is its dp:, as the run's
from sim.schema import StrictModel

Probability = Field(ge=0, le=1)
_SPEC_KNOBS = ("spec_acceptance", "spec_method", "spec_draft_model", "spec_draft_cost")
_DISAGG_KNOBS = ("kv_transfer_gb_s", "kv_transfer_latency_us", "decode_router", "prefill", "decode")


class GroupKnobs(StrictModel):
    """What a disaggregated prefill or decode group may set differently from the rest of the config:
    its hardware, policy and budgets, and its parallel layout under the same keys (and engine
    spellings) as the run's (sim/inputs/layout/config.py); None: the run's value."""

    hardware: str | None = None
    tp: PositiveInt | None = None
    policy: Literal["continuous", "chunked", "radix"] | None = None
    max_num_seqs: PositiveInt | None = None
    max_num_batched_tokens: PositiveInt | None = None
    chunk_size: PositiveInt | None = None
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)
    # the group's layout (sim/engine/disagg/build.py); pp is accepted so that it is refused in one line
    pp: PositiveInt | None = None
    dp: PositiveInt | None = None
    ep: PositiveInt | None = None
    enable_dp_attention: bool | None = None
    enable_expert_parallel: bool | None = None
    moe_a2a_backend: Literal["nccl", "deepep"] | None = None
    deepep_mode: Literal["auto", "normal", "low_latency"] | None = None
    enable_two_batch_overlap: bool | None = None
    ep_num_redundant_experts: int | None = Field(None, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _engine_key_names(cls, data):
        return engine_names_to_keys(data) if isinstance(data, dict) else data


class FeatureKnobs(StrictModel):
    # per-request latency attribution (sim/run/attribution.py); ~0.3 s of the ~1.75 s full Splitwise simulation
    # (bench/bench_simulate.py); planner runs switch it off
    latency_attribution: bool = True
    # speculative decoding (sim/engine/spec_decode.py): off while spec_tokens == 0
    spec_tokens: int = Field(0, ge=0, le=16)  # k proposed tokens per step
    spec_acceptance: list[float] = [0.8]  # per position, or one value for every position; each in [0, 1]
    spec_method: Literal["heads", "draft", "mtp"] = "heads"  # EAGLE-style heads, a draft model, the model's MTP layers
    spec_draft_model: str | None = None  # spec_method draft: the draft's model spec
    spec_draft_cost: float = Field(0.05, ge=0, le=1e3)  # heads: one proposal's cost / a target decode step's
    # host-memory tier of the radix prefix cache (sim/engine/kv/host_tier.py): off at 0
    cpu_cache_gib: float = Field(0.0, ge=0, le=MAX_HOST_GIB)  # host memory per replica for evicted prefix blocks
    # disaggregated prefill/decode (sim/engine/disagg/): off while prefill_replicas is None
    prefill_replicas: PositiveInt | None = Field(None, le=MAX_CLUSTER_REPLICAS)
    decode_replicas: PositiveInt | None = Field(None, le=MAX_CLUSTER_REPLICAS)
    prefill: GroupKnobs = GroupKnobs()
    decode: GroupKnobs = GroupKnobs()
    kv_transfer_gb_s: PositiveFloat | None = None  # override the profile's link bandwidth (per GPU pair)
    kv_transfer_latency_us: float | None = Field(None, ge=0, le=MAX_TIME_S)  # override the link latency
    decode_router: Literal["round_robin", "least_outstanding", "least_kv"] = "least_kv"

    @model_validator(mode="after")
    def _spec_knobs(self):
        a = self.spec_acceptance
        if self.spec_tokens and len(a) not in (1, self.spec_tokens):
            raise ValueError(f"spec_acceptance lists one rate, or one per proposed token ({self.spec_tokens})")
        if any(not 0.0 <= x <= 1.0 for x in a):
            raise ValueError("spec_acceptance rates must lie in [0, 1]")
        if self.spec_tokens and self.spec_method == "draft" and self.spec_draft_model is None:
            raise ValueError("spec_method draft needs spec_draft_model")
        return self

    @model_validator(mode="after")
    def _disagg_knobs(self):
        if (self.prefill_replicas is None) != (self.decode_replicas is None):
            raise ValueError("set both prefill_replicas and decode_replicas (--prefill-replicas, --decode-replicas; "
                             "each >= 1), or neither")
        if self.is_disaggregated and self.prefill_replicas + self.decode_replicas > MAX_CLUSTER_REPLICAS:
            raise ValueError(f"prefill_replicas + decode_replicas must be at most {MAX_CLUSTER_REPLICAS:,}")
        return self

    def idle_knob(self) -> tuple[str, str] | None:
        """(knob, what it needs) for a feature knob set away from its default whose feature is off,
        so it would change nothing (refused by `sim.run.invoke.run`: never silently ignored); else None.
        Not a validator: `infersim disagg` and the planner build disaggregated layouts from a base
        config that carries the groups' knobs before its replica counts."""
        disagg_flags = "--prefill-replicas and --decode-replicas"
        for knobs, needs, off in ((_SPEC_KNOBS, "--spec-tokens > 0", not self.spec_tokens),
                                  (_DISAGG_KNOBS, disagg_flags, not self.is_disaggregated)):
            for knob in knobs if off else ():
                if getattr(self, knob) != type(self).model_fields[knob].get_default(call_default_factory=True):
                    return knob, needs
        return None

    @property
    def is_disaggregated(self) -> bool:
        return self.prefill_replicas is not None

    def acceptance_per_position(self) -> list[float]:
        a = self.spec_acceptance
        return list(a) * self.spec_tokens if len(a) == 1 else list(a)
