"""A hardware profile's efficiency terms: the roofline's compute and memory ceilings per op class, the
small-M GEMM ramps, paged-attention efficiency per block size, per-dtype ceilings (sim/inputs/hardware.py
holds the profile they belong to)."""

from __future__ import annotations

from pydantic import ConfigDict, Field, PositiveInt, field_validator, model_validator

from sim.schema import Plausible, StrictModel

_STRICT = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
Fraction = Field(gt=0, le=1)


# GEMM op classes a profile may give its own ceiling / ramp. experts: MoE grouped GEMM; experts_ep: the same
# under expert parallelism; experts_deepgemm: DeepGEMM's grouped GEMMs behind DeepEP (sim/cost/expert_parallel.py)
GEMM_OP_CLASSES = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj", "lm_head", "experts", "experts_ep",
                   "experts_deepgemm")


def _check_op_classes(table: dict | None) -> None:
    """Every key of a per-op table is a GEMM op class."""
    for op in table or {}:
        if op not in GEMM_OP_CLASSES:
            raise ValueError(f"unknown GEMM op class {op!r}; allowed: {', '.join(GEMM_OP_CLASSES)}")


class Efficiency(StrictModel):
    """Roofline efficiency terms (documented defaults in each YAML; calibration refits them)."""

    model_config = _STRICT
    gemm_compute_max: float = Fraction
    gemm_half_tokens: float = Field(ge=0)
    memory: float = Fraction
    attention_compute: float = Fraction
    paged_attention_memory: dict[PositiveInt, float]
    allreduce_bus: float = Fraction
    roofline_blend: float = Field(ge=1)
    kernel_launch_us: Plausible("kernel_us")
    step_overhead_us: Plausible("step_overhead_us")
    # Tile quantization of GEMM M in the compute term (M rounded up to a multiple of this);
    # None (the default) leaves M as is. Calibration may set it (see sim/cost/roofline.py).
    gemm_tile_tokens: PositiveInt | None = None
    # Compute-efficiency ceiling per GEMM op class (qkv_proj, o_proj, gate_up_proj, down_proj, lm_head),
    # replacing gemm_compute_max for that class (its N:K aspect and fused kernels); None or a class
    # not listed: gemm_compute_max. See sim/cost/roofline.py `gemm_compute_efficiency`.
    gemm_compute_max_by_op: dict[str, float] | None = None
    # Compute-ramp half point (rows M at which half the ceiling is reached) per GEMM op class, replacing
    # gemm_half_tokens for that class: a grouped GEMM (`experts_ep`) pads and pipelines every expert's
    # rows separately, so its ramp is its own. None or a class not listed: gemm_half_tokens.
    gemm_half_tokens_by_op: dict[str, float] | None = None
    # Output elements (M * N per GPU) added to the compute ramp's half point: half-M =
    # gemm_half_tokens + this / N (a narrow output has few tiles per row to fill the SMs).
    # None (the default): half-M = gemm_half_tokens.
    gemm_half_output_elems: float | None = Field(default=None, ge=0)
    # Memory efficiency of the elementwise kernels (norms, rotary, activation, adds); None: `memory`.
    elementwise_memory: float | None = Field(default=None, gt=0, le=1)
    # Fixed time per layer of those kernels together (launches, tiny-tensor floors); None: 5 launches.
    elementwise_fixed_us: Plausible("kernel_us") | None = None
    # GEMM compute efficiency ceiling per weight dtype, replacing gemm_compute_max for GEMMs whose
    # weights are in that dtype (e.g. {fp4: 0.4}: FP4 tensor-core kernels reach a smaller share of
    # their higher peak than bf16 ones). None / a dtype not listed: gemm_compute_max.
    gemm_compute_max_by_dtype: dict[str, float] | None = None
    # The weight dtype a gemm_compute_max_by_op ceiling was measured or fitted at (e.g. {experts_deepgemm: fp8}:
    # DeepGEMM's FP8 tables): that ceiling is a share of that dtype's own peak, so a gemm_compute_max_by_dtype
    # entry rescales it relative to that dtype's entry (unchanged at that dtype). Classes not listed are
    # relative to gemm_compute_max. None: all are. See `for_weight_dtype`.
    gemm_ceiling_dtype_by_op: dict[str, str] | None = None
    # Wave quantization of a GEMM's compute term (calibrated, sim/cost/roofline.py `gemm_compute_flops`):
    # output tiles of gemm_tile_tokens rows x gemm_tile_n columns, gemm_wave_slots tiles per wave (one per SM:
    # the profile's compute.n_sms); the compute term runs whole waves. All three or none (None: no waves).
    gemm_tile_n: PositiveInt | None = None
    gemm_wave_slots: PositiveInt | None = None
    # The host's dispatch time per GEMM kernel launched eagerly (no CUDA graph): an eager kernel takes at
    # least this long (max(floor, kernel)). Applied by the engine layer only to steps that run outside a
    # captured CUDA graph (sim/inputs/engines/eager.py); graph replays never pay it. None: not modelled (0).
    eager_gemm_floor_us: Plausible("kernel_us") | None = None

    @model_validator(mode="after")
    def _waves_come_whole(self) -> Efficiency:
        wave = (self.gemm_tile_n, self.gemm_wave_slots)
        if any(v is not None for v in wave) and (None in wave or self.gemm_tile_tokens is None):
            raise ValueError("gemm_tile_n and gemm_wave_slots come together, with gemm_tile_tokens")
        return self

    @field_validator("gemm_ceiling_dtype_by_op")
    @classmethod
    def _ceiling_dtypes(cls, table: dict[str, str] | None) -> dict[str, str] | None:
        """Keys are GEMM op classes; values weight dtypes infersim knows."""
        from sim.inputs.dtypes import dtype_names

        _check_op_classes(table)
        for op, dtype in (table or {}).items():
            if dtype not in dtype_names():
                raise ValueError(f"unknown dtype {dtype!r} of {op}; allowed: {', '.join(dtype_names())}")
        return table

    @field_validator("gemm_compute_max_by_dtype")
    @classmethod
    def _known_dtypes(cls, table: dict[str, float] | None) -> dict[str, float] | None:
        """Keys are weight dtypes infersim knows; values in (0, 1]."""
        from sim.inputs.dtypes import dtype_names

        for dtype, value in (table or {}).items():
            if dtype not in dtype_names():
                raise ValueError(f"unknown dtype {dtype!r}; allowed: {', '.join(dtype_names())}")
            if not 0 < value <= 1 or value != value:
                raise ValueError(f"efficiency {value} for {dtype} must be in (0, 1]")
        return table

    def for_weight_dtype(self, weight_dtype: str) -> Efficiency:
        """These terms with gemm_compute_max replaced by that dtype's entry, if it has one; per-op
        ceilings (gemm_compute_max_by_op) scale by the same ratio (entry / gemm_compute_max), except those
        measured at a dtype of their own (gemm_ceiling_dtype_by_op), which scale by entry / that dtype's
        entry (gemm_compute_max where it has none): unchanged when priced at the dtype they were measured
        at. A dtype without an entry gets these terms as they stand (every ceiling, as written)."""
        by_dtype = self.gemm_compute_max_by_dtype or {}
        if weight_dtype not in by_dtype:
            return self
        entry = by_dtype[weight_dtype]
        bases = {op: by_dtype.get(dtype, self.gemm_compute_max)
                 for op, dtype in (self.gemm_ceiling_dtype_by_op or {}).items()}
        by_op = {op: min(1.0, value * (entry / bases.get(op, self.gemm_compute_max)))
                 for op, value in (self.gemm_compute_max_by_op or {}).items()}
        return self.model_copy(update={"gemm_compute_max": entry,
                                       "gemm_compute_max_by_op": by_op or self.gemm_compute_max_by_op})

    @field_validator("paged_attention_memory")
    @classmethod
    def _calibrated_block_sizes(cls, table: dict[int, float]) -> dict[int, float]:
        """At least one block size; sizes powers of two (log2-interpolated); efficiencies in (0, 1]."""
        if not table:
            raise ValueError("give at least one block_size: efficiency pair, e.g. {16: 0.6}")
        for size, value in table.items():
            if size & (size - 1):
                raise ValueError(f"block size {size} must be a power of two")
            if not 0 < value <= 1 or value != value:
                raise ValueError(f"efficiency {value} at block size {size} must be in (0, 1]")
        return table

    @field_validator("gemm_compute_max_by_op")
    @classmethod
    def _per_op_ceilings(cls, table: dict[str, float] | None) -> dict[str, float] | None:
        """Keys are GEMM op classes; values efficiencies in (0, 1]."""
        _check_op_classes(table)
        for op, value in (table or {}).items():
            if not 0 < value <= 1 or value != value:
                raise ValueError(f"efficiency {value} of {op} must be in (0, 1]")
        return table

    @field_validator("gemm_half_tokens_by_op")
    @classmethod
    def _per_op_half_tokens(cls, table: dict[str, float] | None) -> dict[str, float] | None:
        """Keys are GEMM op classes; values rows, finite and >= 0."""
        for op, value in (table or {}).items():
            if op not in GEMM_OP_CLASSES:
                raise ValueError(f"unknown GEMM op class {op!r}; allowed: {', '.join(GEMM_OP_CLASSES)}")
            if not 0 <= value < float("inf"):
                raise ValueError(f"half-point rows {value} of {op} must be a finite number >= 0")
        return table

    def paged_efficiency(self, block_size: int) -> float:
        """KV-read efficiency for `block_size`, log2-interpolated between calibrated sizes."""
        import numpy as np

        sizes = sorted(self.paged_attention_memory)
        values = [self.paged_attention_memory[s] for s in sizes]
        return float(np.interp(np.log2(block_size), np.log2(sizes), values))
