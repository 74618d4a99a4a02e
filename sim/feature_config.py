"""Config knobs of the beyond-one-engine features (speculative decoding, the host-memory prefix
tier, disaggregated prefill/decode). `EngineConfig` inherits them; all are off by default."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveFloat, PositiveInt, model_validator

from sim.schema import StrictModel

Probability = Field(ge=0, le=1)


class GroupKnobs(StrictModel):
    """What a disaggregated prefill or decode group may set differently from the rest of the config."""

    hardware: str | None = None
    tp: PositiveInt | None = None
    policy: Literal["continuous", "chunked", "radix"] | None = None
    max_num_seqs: PositiveInt | None = None
    max_num_batched_tokens: PositiveInt | None = None
    chunk_size: PositiveInt | None = None
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)


class FeatureKnobs(StrictModel):
    # per-request latency attribution (sim/attribution.py); ~0.3 s of the ~1.75 s full Splitwise simulation
    # (bench/bench_simulate.py); planner runs switch it off
    latency_attribution: bool = True
    # speculative decoding (sim/spec_decode.py): off while spec_tokens == 0
    spec_tokens: int = Field(0, ge=0, le=16)  # k proposed tokens per step
    spec_acceptance: list[float] = [0.8]  # per position, or one value for every position; each in [0, 1]
    spec_method: Literal["heads", "draft", "mtp"] = "heads"  # EAGLE-style heads, a draft model, the model's MTP layers
    spec_draft_model: str | None = None  # spec_method draft: the draft's model spec
    spec_draft_cost: float = Field(0.05, ge=0)  # heads: one proposal's cost / a target decode step's
    # host-memory tier of the radix prefix cache (sim/kv/host_tier.py): off at 0
    cpu_cache_gib: float = Field(0.0, ge=0)  # host memory per replica for evicted prefix blocks
    # disaggregated prefill/decode (sim/disagg/): off while prefill_replicas is None
    prefill_replicas: PositiveInt | None = None
    decode_replicas: PositiveInt | None = None
    prefill: GroupKnobs = GroupKnobs()
    decode: GroupKnobs = GroupKnobs()
    kv_transfer_gb_s: PositiveFloat | None = None  # override the profile's link bandwidth (per GPU pair)
    kv_transfer_latency_us: float | None = Field(None, ge=0)  # override the link latency
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
            raise ValueError("set both prefill_replicas and decode_replicas (each >= 1), or neither")
        return self

    @property
    def is_disaggregated(self) -> bool:
        return self.prefill_replicas is not None

    def acceptance_per_position(self) -> list[float]:
        a = self.spec_acceptance
        return list(a) * self.spec_tokens if len(a) == 1 else list(a)
