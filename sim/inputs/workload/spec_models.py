"""The workload spec schema (pydantic): a trace plus transforms, or a synthetic workload.

Every model forbids unknown keys, so a typo is an error naming the file and the key.
Distributions of token counts (`Dist`) are tagged by `kind`. Ranges: token counts in
[1, MAX_TOKENS], request counts at most MAX_REQUESTS (also rate x duration), rates and times
finite, seeds in [0, 2**63); `true`/`false` are never numbers (see sim.schema).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, PositiveFloat, model_validator

from sim.inputs.budget import MAX_TIME_S
from sim.schema import MAX_RATE_QPS, MAX_REQUESTS, MAX_SEED_EXCLUSIVE, MAX_TOKENS, StrictModel

Tokens = Annotated[int, Field(ge=1, le=MAX_TOKENS)]
Seed = Annotated[int, Field(ge=0, lt=MAX_SEED_EXCLUSIVE)]
MAX_LOG_SIGMA = 10.0  # lognormal sigma (log space); e^10 already spans four orders of magnitude per sd
MAX_GAMMA_CV = 100.0


class _Strict(StrictModel):
    pass


class FixedDist(_Strict):
    kind: Literal["fixed"]
    value: Tokens


class UniformDist(_Strict):
    """Whole numbers low..high inclusive, equally likely."""

    kind: Literal["uniform"]
    low: Tokens
    high: Tokens

    @model_validator(mode="after")
    def _ordered(self) -> UniformDist:
        if self.high < self.low:
            raise ValueError("high must be >= low")
        return self


class LognormalDist(_Strict):
    """Lognormal with the given mean (tokens) and log-space sigma, rounded, clipped to [1, max]."""

    kind: Literal["lognormal"]
    mean: float = Field(gt=0, le=MAX_TOKENS)
    sigma: float = Field(gt=0, le=MAX_LOG_SIGMA)
    max: Tokens | None = None  # None: MAX_TOKENS


Dist = Annotated[FixedDist | UniformDist | LognormalDist, Field(discriminator="kind")]


RateQps = Annotated[float, Field(gt=0, le=MAX_RATE_QPS)]  # requests/s (sim.schema.MAX_RATE_QPS)


class PoissonArrival(_Strict):
    kind: Literal["poisson"]
    rate_qps: RateQps


class GammaArrival(_Strict):
    """Renewal process with Gamma gaps: `cv` > 1 is burstier than Poisson, < 1 smoother."""

    kind: Literal["gamma"]
    rate_qps: RateQps
    cv: float = Field(gt=0, le=MAX_GAMMA_CV)


class ConstantArrival(_Strict):
    kind: Literal["constant"]
    rate_qps: RateQps


class ClosedLoopArrival(_Strict):
    """`concurrency` clients; each sends its next request a think time after the last ends: mean
    `think_time_s`, Gamma-distributed with CV `think_time_cv` (0: fixed). `length_jitter` j
    scales each pool request's prompt and output by a seeded uniform factor in [1-j, 1+j]."""

    kind: Literal["closed_loop"]
    concurrency: Annotated[int, Field(ge=1, le=MAX_REQUESTS)]
    think_time_s: float = Field(0.0, ge=0, le=MAX_TIME_S)
    think_time_cv: float = Field(0.0, ge=0, le=MAX_GAMMA_CV)
    length_jitter: float = Field(0.0, ge=0, lt=1)


Arrival = Annotated[
    PoissonArrival | GammaArrival | ConstantArrival | ClosedLoopArrival,
    Field(discriminator="kind"),
]


class Lengths(_Strict):
    """Either `prompt` and `output` distributions, or `trace`: (prompt, output) pairs
    resampled jointly from a trace (a bundled name such as `sharegpt`, or a path)."""

    prompt: Dist | None = None
    output: Dist | None = None
    trace: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> Lengths:
        pair = self.prompt is not None and self.output is not None
        if bool(self.trace) == pair or (not pair and (self.prompt or self.output)):
            raise ValueError("give either both `prompt` and `output`, or `trace`")
        return self


class SystemPrompts(_Strict):
    """`n_templates` shared system prompts, template k (1-based) chosen with weight k^-zipf_s."""

    n_templates: Annotated[int, Field(ge=1, le=MAX_REQUESTS)]
    zipf_s: float = Field(1.0, ge=0)
    tokens: Dist


class FewShot(_Strict):
    """Few-shot templates: one instruction shared by all, then `n_shots` examples that are
    template-specific; template popularity Zipf like system prompts."""

    n_templates: Annotated[int, Field(ge=1, le=MAX_REQUESTS)]
    zipf_s: float = Field(1.0, ge=0)
    instruction_tokens: int = Field(0, ge=0, le=MAX_TOKENS)
    n_shots: Annotated[int, Field(ge=1, le=MAX_TOKENS)]
    shot_tokens: Dist


class MultiTurn(_Strict):
    """Conversations: turn n's prompt is the whole history plus a new message; turns of a
    conversation arrive `think_time_s` (exponential mean, covers the reply too) apart."""

    turns: Dist
    think_time_s: float = Field(ge=0, le=MAX_TIME_S)


class Prefix(_Strict):
    system_prompts: SystemPrompts | None = None
    few_shot: FewShot | None = None
    multi_turn: MultiTurn | None = None


class Adapters(_Strict):
    """LoRA adapters the requests name (docs/lora.md): `n_adapters` of them, adapter k (1-based)
    chosen with weight k^-zipf_s (`zipf`) or equally (`uniform`); a conversation (multi_turn) keeps one
    adapter. `base_share` of the requests (sessions) use the base model alone. `rank`: every adapter's
    LoRA rank, or `ranks`: one per adapter (vLLM's ranks: 1, 8, 16, 32, 64, 128, 256, 320, 512)."""

    n_adapters: Annotated[int, Field(ge=1, le=1_000_000)]
    popularity: Literal["uniform", "zipf"] = "zipf"
    zipf_s: float = Field(1.0, ge=0, le=10)
    rank: Literal[1, 8, 16, 32, 64, 128, 256, 320, 512] = 16
    ranks: list[Literal[1, 8, 16, 32, 64, 128, 256, 320, 512]] | None = None
    base_share: float = Field(0.0, ge=0, lt=1)

    @model_validator(mode="after")
    def _one_rank_each(self) -> Adapters:
        if self.ranks is not None and len(self.ranks) != self.n_adapters:
            raise ValueError(f"ranks lists one rank per adapter ({self.n_adapters}), not {len(self.ranks)}")
        if self.popularity == "uniform" and self.zipf_s != 1.0:
            raise ValueError("zipf_s goes with popularity zipf")
        return self

    def rank_of(self, adapter: int) -> int:
        return self.ranks[adapter] if self.ranks is not None else self.rank


class Synthetic(_Strict):
    arrival: Arrival
    lengths: Lengths
    prefix: Prefix = Prefix()
    n_samples: Dist | None = None  # parallel sampling n per request
    n_requests: Annotated[int, Field(ge=1, le=MAX_REQUESTS)] | None = None
    duration_s: PositiveFloat | None = None
    hash_block_tokens: Tokens = 16
    adapters: Adapters | None = None  # LoRA adapters per request (docs/lora.md); None: the base model only

    @model_validator(mode="after")
    def _size(self) -> Synthetic:
        if (self.n_requests is None) == (self.duration_s is None):
            raise ValueError("give exactly one of n_requests and duration_s")
        rate_qps = getattr(self.arrival, "rate_qps", None)
        if self.duration_s is not None and rate_qps is not None and rate_qps * self.duration_s > MAX_REQUESTS:
            raise ValueError(f"arrival.rate_qps x duration_s must be at most {MAX_REQUESTS:,} requests")
        if self.arrival.kind == "closed_loop":
            if self.n_requests is None:
                raise ValueError("a closed loop needs n_requests (its pool size)")
            if self.prefix.multi_turn is not None:
                raise ValueError(
                    "multi_turn needs an open-loop arrival (turn times are in the trace)"
                )
        return self


class Transforms(_Strict):
    time_window_s: tuple[float, float] | None = None
    rate_scale: PositiveFloat | None = None
    target_qps: PositiveFloat | None = None
    clip_max_model_len: Annotated[int, Field(ge=2, le=MAX_TOKENS)] | None = None
    sample_n: Annotated[int, Field(ge=1, le=MAX_REQUESTS)] | None = None
    shuffle_seed: Seed | None = None

    @model_validator(mode="after")
    def _window_ordered(self) -> Transforms:
        if self.time_window_s is not None and not self.time_window_s[0] < self.time_window_s[1]:
            raise ValueError("time_window_s is [start, end] with start < end")
        return self


class WorkloadSpec(_Strict):
    """A trace (bundled name, or a path relative to the spec file) or a synthetic block."""

    trace: str | None = None
    format: str | None = None
    columns: dict[str, str] | None = None
    time_unit: Literal["s", "ms", "us"] = "s"
    keep_failed: bool = False
    arrival: Arrival | None = None  # re-time the trace's requests (or run them closed loop)
    synthetic: Synthetic | None = None
    transforms: Transforms = Transforms()
    seed: Seed | None = None

    @model_validator(mode="after")
    def _one_source(self) -> WorkloadSpec:
        if (self.trace is None) == (self.synthetic is None):
            raise ValueError("give exactly one of `trace` and `synthetic`")
        if self.synthetic is not None and (self.format or self.columns or self.arrival):
            raise ValueError("format, columns and arrival go with `trace`, not `synthetic`")
        return self
