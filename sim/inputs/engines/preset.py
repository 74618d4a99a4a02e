"""Engine presets: what a serving engine (vLLM, SGLang, TensorRT-LLM, LMDeploy) does around the
GPU work, as bundled, documented YAML data validated by pydantic.

A preset describes one engine version range (`family@version`, e.g. `vllm@0.15`; the bare family
name `vllm` means its newest bundled version). It sets the scheduler knobs with the engine's own
semantics (`scheduling`, with `large_gpu_scheduling` where the engine picks other defaults on big
GPUs), the KV-cache dtype defaults (`kv`), CUDA-graph capture sizes (`cuda_graph`), when the engine
uses its custom all-reduce (`custom_allreduce`), and the engine's CPU cost per step (`overhead`),
which `sim.inputs.engines.overhead.EngineCost` adds to or overlaps with the GPU time.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, PositiveInt, model_validator

from sim.errors import InputError
from sim.inputs.budget import MAX_CAPTURE_SIZES
from sim.inputs.engines.preset_rules import AttentionDpBalance, GpuMemoryTier, MemFractionRule
from sim.schema import MAX_TOKENS, Plausible, StrictModel
from sim.yamlio import read_mapping, validate

PRESETS_DIR = Path(__file__).resolve().parent / "presets"
# StrictModel: unknown keys refused, finite floats only (no .inf/.nan), no true/false for numbers; the
# CPU costs and scheduler sizes are plausible ranges of sim/specs/plausible.yaml.
CaptureSize = Annotated[int, Field(ge=1, le=MAX_TOKENS)]


class Scheduling(StrictModel):
    """Scheduler knobs, named as infersim's config keys (= vLLM's names where they exist)."""

    policy: Literal["static", "continuous", "chunked", "radix"]
    max_num_seqs: Plausible("batch_seqs", int)
    max_num_batched_tokens: Plausible("batch_tokens", int)
    chunk_size: Plausible("batch_tokens", int) | None = None  # largest prompt chunk one request takes per step
    block_size: Plausible("block_tokens", int)
    preemption_mode: Literal["recompute", "swap"] = "recompute"
    kv_admission: Literal["on_demand", "reserve_full"] = "on_demand"  # see sim/inputs/config.py
    radix_ordering: Literal["fcfs", "lpm"] = "fcfs"
    gpu_memory_utilization: float = Field(gt=0, le=1)
    # what gpu_memory_utilization is a share of: all HBM (vLLM, SGLang's mem_fraction_static, LMDeploy), or the
    # memory left after weights, activations and runtime (TensorRT-LLM's kv_cache_free_gpu_mem_fraction): the KV pool
    # (static_share: SGLang's mem_fraction_static, weights + KV pool = that share of HBM, activations outside it)
    kv_pool: Literal["share_of_hbm", "share_of_free", "static_share"] = "share_of_hbm"


class KVDefaults(StrictModel):
    """KV-cache dtype when the user gives none: for full-precision and for quantized checkpoints."""

    dtype: str = "bf16"
    dtype_quantized_checkpoint: str = "bf16"


class CudaGraph(StrictModel):
    """Captured batch sizes: a step whose size is at most the largest captured size runs the graph
    of the next captured size up, so its GPU time is that of the padded batch. `scope` says which
    steps replay graphs: `decode` (pure decode steps; size = sequences) or `all` (piecewise graphs
    around attention; size = tokens of any step). A step larger than the largest captured size runs
    eager, unpadded. Which listed sizes a run captures depends on its limits: `captured_sizes` in
    sim/inputs/engines/overhead.py."""

    capture_sizes: list[CaptureSize] = Field([], max_length=MAX_CAPTURE_SIZES)
    scope: Literal["decode", "all"] = "decode"
    # only sizes up to max_per_seq x max_num_seqs are captured (vLLM V1: min(2 x max_num_seqs, 512))
    max_per_seq: PositiveInt | None = None
    # sizes above max_num_batched_tokens are dropped too (a decode step of n sequences is n tokens: TensorRT-LLM)
    within_token_budget: bool = False
    # the cap itself is captured when a listed size above it was dropped (TensorRT-LLM 1.0 with enable_padding)
    capture_cap: bool = False
    # a batch between captured sizes is padded to the next one up (vLLM, SGLang, TensorRT-LLM with
    # enable_padding); false: only a batch of exactly a captured size replays its graph, others run eager
    padding: bool = True

    @model_validator(mode="after")
    def _sorted_unique(self) -> CudaGraph:
        if list(self.capture_sizes) != sorted(set(self.capture_sizes)):
            raise ValueError("capture_sizes must be strictly increasing")
        if self.capture_cap and self.max_per_seq is None and not self.within_token_budget:
            raise ValueError("capture_cap needs a cap: max_per_seq or within_token_budget")
        return self


class Overhead(StrictModel):
    """The engine's CPU time per step: `per_step_us + per_seq_us * sequences + per_token_us *
    tokens` (scheduling, input preparation, sampling, detokenisation). `overlap: false` adds it to
    the GPU time; `overlap: true` runs it beside the GPU (the next step is prepared while this one
    computes): step = max(gpu, cpu) + `residue_us`, the part that cannot overlap.
    `num_scheduler_steps` > 1 (vLLM multi-step) schedules once per that many decode steps, so a
    decode step pays 1/n of the per-step and per-sequence cost."""

    per_step_us: Plausible("step_overhead_us")
    per_seq_us: Plausible("seq_overhead_us")
    per_token_us: Plausible("token_overhead_us")
    overlap: bool = False
    residue_us: Plausible("step_overhead_us") = 0.0
    num_scheduler_steps: PositiveInt = 1
    # the batch of step n+1 is formed when step n is launched (vLLM V1 async scheduling, SGLang and
    # TensorRT-LLM overlap schedulers): a request arriving during step n joins step n+2 (sim/engine/replica.py)
    async_scheduling: bool = False
    # the API server's request path, per request (sim/engine/frontend.py): added to TTFT and E2E
    frontend_ms: Plausible("frontend_ms") = 0.0
    # tokenising the prompt before the engine core sees it, per prompt token, in ONE process that takes
    # requests in arrival order (SGLang's tokenizer manager, TensorRT-LLM's server): a burst queues there
    tokenize_us_per_token: float = Field(0.0, ge=0, le=100)


class LargeGpuScheduling(StrictModel):
    """Defaults the engine picks instead of `scheduling`'s on GPUs with at least `min_hbm_gib` of
    memory whose profile name contains none of `except_names` (vLLM >= 0.9.1: >= 70 GiB, not A100)."""

    min_hbm_gib: Plausible("hbm_gib")
    except_names: list[str] = []
    max_num_seqs: Plausible("batch_seqs", int)
    max_num_batched_tokens: Plausible("batch_tokens", int)

    def applies(self, hw) -> bool:
        return hw.memory.hbm_capacity_gib >= self.min_hbm_gib and not any(n in hw.name for n in self.except_names)


class CustomAllreduce(StrictModel):
    """When the engine runs its custom all-reduce kernel instead of NCCL: the group size is one of
    `world_sizes`, the message is below `max_bytes`, and the GPUs are all NVLink-connected (or the
    group is `pcie_max_world_size` GPUs or fewer). Otherwise NCCL (`allreduce_kind: engine`)."""

    world_sizes: list[PositiveInt]
    max_bytes: Plausible("message_bytes", int)
    pcie_max_world_size: int = Field(2, ge=0)
    # a group size with its own limit (TensorRT-LLM's custom workspace: 16 MB for 2 GPUs, 8 MB above)
    max_bytes_by_world_size: dict[PositiveInt, Plausible("message_bytes", int)] = {}

    def max_bytes_for(self, world_size: int) -> int:
        """The largest message the custom kernel takes on a group of `world_size` GPUs."""
        return self.max_bytes_by_world_size.get(world_size, self.max_bytes)


class BlockSizeRule(StrictModel):
    """The KV block sizes (tokens per block) the engine starts with; any other size makes the real
    engine refuse to start, so a simulation of it is refused too (sim/inputs/config.py). `choices`
    lists them; `multiple_of` and `power_of_two` state a rule; `source` says where the engine says so."""

    choices: list[PositiveInt] | None = None
    multiple_of: PositiveInt | None = None
    power_of_two: bool = False
    source: str = Field(min_length=1)

    def allows(self, block_size: int) -> bool:
        if self.choices is not None and block_size not in self.choices:
            return False
        if self.multiple_of is not None and block_size % self.multiple_of:
            return False
        return not (self.power_of_two and block_size & (block_size - 1))

    def allowed_text(self) -> str:
        """The allowed sizes in words: `16, 32, 64 or 128`, `multiples of 32`, `powers of two`."""
        if self.choices is not None:
            sizes = [str(size) for size in self.choices if self.allows(size)]
            return ", ".join(sizes[:-1]) + f" or {sizes[-1]}" if len(sizes) > 1 else sizes[0]
        rules = [f"multiples of {self.multiple_of}"] if self.multiple_of else []
        rules += ["powers of two"] if self.power_of_two else []
        return " that are ".join(rules) or "any size"


class EnginePreset(StrictModel):
    name: str
    engine: str
    version: str
    version_range: str = ""  # the releases this preset describes
    changes: list[str] = []  # what differs from the previous bundled version of the family
    description: str = ""
    scheduling: Scheduling
    block_sizes: BlockSizeRule | None = None  # None: the engine takes any positive block size
    large_gpu_scheduling: LargeGpuScheduling | None = None
    gpu_memory_tiers: list[GpuMemoryTier] | None = None  # chunk and CUDA-graph limit by GPU memory (SGLang 0.5)
    dp_attention_divides_chunk: bool = False  # SGLang: each attention-DP rank takes chunk_size // dp
    mem_fraction_rule: MemFractionRule | None = None  # SGLang: gpu_memory_utilization from the GPU and limits
    attention_dp_balance: AttentionDpBalance | None = None  # TensorRT-LLM (sim/engine/adp_balance.py)
    custom_allreduce: CustomAllreduce | None = None
    kv: KVDefaults = KVDefaults()
    cuda_graph: CudaGraph = CudaGraph()
    allreduce_kind: Literal["nccl", "custom", "auto", "engine"] = "nccl"  # engine: `custom_allreduce`'s rule
    overhead: Overhead
    fitted_on: str = ""  # which validation cases the overhead numbers were fitted on
    sources: list[str] = Field(min_length=1)


    @model_validator(mode="after")
    def _rule_for_engine_allreduce(self) -> EnginePreset:
        if self.allreduce_kind == "engine" and self.custom_allreduce is None:
            raise ValueError("allreduce_kind engine needs a custom_allreduce rule")
        if self.attention_dp_balance is not None and self.attention_dp_balance.enable_balance \
                and self.scheduling.policy not in ("chunked", "radix"):
            raise ValueError("attention_dp_balance.enable_balance holds context work in the chunked schedulers "
                             "only; allowed with scheduling.policy chunked or radix")
        if self.block_sizes is not None and not self.block_sizes.allows(self.scheduling.block_size):
            raise ValueError(f"scheduling.block_size {self.scheduling.block_size} is not one block_sizes allows")
        return self

    @property
    def family(self) -> str:
        """The engine family (`vllm` of `vllm@0.15`): what launch lines and aliases key on."""
        return self.name.split("@")[0]


def _version_key(name: str) -> tuple[int, ...]:
    version = name.partition("@")[2]
    return tuple(int(part) if part.isdigit() else 0 for part in version.split("."))


def engine_versions() -> list[str]:
    """Every bundled preset, `family@version`, sorted by family then version."""
    stems = [p.stem for p in PRESETS_DIR.glob("*.yaml")]
    return sorted(stems, key=lambda n: (n.partition("@")[0], _version_key(n)))


def engine_families() -> dict[str, str]:
    """family -> its newest bundled version (what the bare family name means)."""
    newest: dict[str, str] = {}
    for name in engine_versions():
        newest[name.partition("@")[0]] = name  # sorted ascending: the last one wins
    return newest


def engine_names() -> list[str]:
    """Every name `--engine` takes: the families and each `family@version`."""
    return sorted(set(engine_families()) | set(engine_versions()))


def resolve_engine_name(name: str) -> str:
    """`vllm` -> `vllm@0.15` (its newest version); a versioned or unknown name as given."""
    return engine_families().get(name, name)


@lru_cache(maxsize=32)
def load_engine(name_or_path: str) -> EnginePreset:
    """A bundled preset by name (`vllm`, `vllm@0.6`) or a user's YAML by path; InputError naming
    the file, field and what is allowed otherwise."""
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        path = PRESETS_DIR / f"{resolve_engine_name(name_or_path)}.yaml"
        if not path.is_file():
            raise InputError("--engine", None, f"unknown engine {name_or_path!r}; bundled: {', '.join(engine_names())}")
    elif not path.exists():
        raise InputError(path, None, "file not found")  # a FIFO, device or folder: read_mapping names it
    preset = validate(EnginePreset, read_mapping(path), path)
    from sim.inputs.dtypes import bytes_per_element

    bytes_per_element(preset.kv.dtype, f"{path}: kv.dtype")
    bytes_per_element(preset.kv.dtype_quantized_checkpoint, f"{path}: kv.dtype_quantized_checkpoint")
    return preset


def kv_pool_share_of_free(engine: str | None) -> bool:
    """Whether `engine`'s preset sizes the KV pool as gpu_memory_utilization x the memory the model leaves
    (TensorRT-LLM) rather than as a share of all HBM (no preset: all HBM)."""
    return engine is not None and load_engine(engine).scheduling.kv_pool == "share_of_free"


def kv_pool_args(engine: str | None) -> dict:
    """`plan_memory`'s KV-pool keywords for `engine`'s preset (no preset: a share of all HBM)."""
    pool = "share_of_hbm" if engine is None else load_engine(engine).scheduling.kv_pool
    return {"share_of_free": pool == "share_of_free", "activations_outside": pool == "static_share"}
