"""Engine presets: what a serving engine (vLLM, SGLang, TensorRT-LLM, LMDeploy) does around the
GPU work, as bundled, documented YAML data validated by pydantic.

A preset sets the scheduler knobs with the engine's own semantics (`scheduling`), the KV-cache
dtype defaults (`kv`), CUDA-graph capture sizes (`cuda_graph`), and the engine's CPU cost per
step (`overhead`), which `sim.engines.overhead.EngineCost` adds to or overlaps with the GPU time.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, PositiveInt, model_validator

from sim.budget import MAX_CAPTURE_SIZES
from sim.errors import InputError
from sim.schema import MAX_TOKENS, StrictModel
from sim.yamlio import read_mapping, validate

PRESETS_DIR = Path(__file__).resolve().parent / "presets"
# StrictModel: unknown keys refused, finite floats only (no .inf/.nan), no true/false for numbers.
MAX_OVERHEAD_US = 1e6  # an engine's CPU cost per step, sequence or token: a second is no engine's
NonNegative = Field(ge=0, le=MAX_OVERHEAD_US)
CaptureSize = Annotated[int, Field(ge=1, le=MAX_TOKENS)]


class Scheduling(StrictModel):
    """Scheduler knobs, named as infersim's config keys (= vLLM's names where they exist)."""

    policy: Literal["static", "continuous", "chunked", "radix"]
    max_num_seqs: PositiveInt
    max_num_batched_tokens: PositiveInt
    chunk_size: PositiveInt | None = None  # largest prompt chunk one request takes per step
    block_size: PositiveInt
    preemption_mode: Literal["recompute", "swap"] = "recompute"
    radix_ordering: Literal["fcfs", "lpm"] = "fcfs"
    gpu_memory_utilization: float = Field(gt=0, le=1)


class KVDefaults(StrictModel):
    """KV-cache dtype when the user gives none: for full-precision and for quantized checkpoints."""

    dtype: str = "bf16"
    dtype_quantized_checkpoint: str = "bf16"


class CudaGraph(StrictModel):
    """Captured batch sizes: a step whose size is at most the largest captured size runs the graph
    of the next captured size up, so its GPU time is that of the padded batch. `scope` says which
    steps replay graphs: `decode` (pure decode steps; size = sequences) or `all` (piecewise graphs
    around attention; size = tokens of any step)."""

    capture_sizes: list[CaptureSize] = Field([], max_length=MAX_CAPTURE_SIZES)
    scope: Literal["decode", "all"] = "decode"

    @model_validator(mode="after")
    def _sorted_unique(self) -> CudaGraph:
        if list(self.capture_sizes) != sorted(set(self.capture_sizes)):
            raise ValueError("capture_sizes must be strictly increasing")
        return self


class Overhead(StrictModel):
    """The engine's CPU time per step: `per_step_us + per_seq_us * sequences + per_token_us *
    tokens` (scheduling, input preparation, sampling, detokenisation). `overlap: false` adds it to
    the GPU time; `overlap: true` runs it beside the GPU (the next step is prepared while this one
    computes): step = max(gpu, cpu) + `residue_us`, the part that cannot overlap.
    `num_scheduler_steps` > 1 (vLLM multi-step) schedules once per that many decode steps, so a
    decode step pays 1/n of the per-step and per-sequence cost."""

    per_step_us: float = NonNegative
    per_seq_us: float = NonNegative
    per_token_us: float = NonNegative
    overlap: bool = False
    residue_us: float = Field(0.0, ge=0, le=MAX_OVERHEAD_US)
    num_scheduler_steps: PositiveInt = 1


class EnginePreset(StrictModel):
    name: str
    engine: str
    version: str
    description: str = ""
    scheduling: Scheduling
    kv: KVDefaults = KVDefaults()
    cuda_graph: CudaGraph = CudaGraph()
    allreduce_kind: Literal["nccl", "custom", "auto"] = "nccl"
    overhead: Overhead
    fitted_on: str = ""  # which validation cases the overhead numbers were fitted on
    sources: list[str] = Field(min_length=1)


def engine_names() -> list[str]:
    return sorted(p.stem for p in PRESETS_DIR.glob("*.yaml"))


@lru_cache(maxsize=32)
def load_engine(name_or_path: str) -> EnginePreset:
    """A bundled preset by name (`vllm`) or a user's YAML by path; InputError naming the file,
    field and what is allowed otherwise."""
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        path = PRESETS_DIR / f"{name_or_path}.yaml"
        if not path.is_file():
            raise InputError("--engine", None, f"unknown engine {name_or_path!r}; bundled: {', '.join(engine_names())}")
    elif not path.is_file():
        raise InputError(path, None, "file not found")
    preset = validate(EnginePreset, read_mapping(path), path)
    from sim.dtypes import bytes_per_element

    bytes_per_element(preset.kv.dtype, f"{path}: kv.dtype")
    bytes_per_element(preset.kv.dtype_quantized_checkpoint, f"{path}: kv.dtype_quantized_checkpoint")
    return preset
