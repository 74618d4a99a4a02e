"""The engine around the GPU: CUDA-graph padding and the engine's CPU time per step.

`EngineCost` wraps a `CostModel` (the GPU work) and offers the same hot-path interface
(`step_time_s`, `decode_run`, `decode_run_times_s`), so schedulers call it unchanged. Per step:

    gpu  = cost of the step, with the batch padded up to the next captured CUDA-graph size
           (non-attention ops at the padded token count; attention and the LM head see only the
           real sequences, as padded slots hold no context and sample nothing)
    cpu  = per_step + per_seq * sequences + per_token * tokens      (pure decode steps under
           multi-step scheduling pay per_step and per_seq once per num_scheduler_steps)
    step = gpu + cpu                       (overlap: false)
    step = max(gpu, cpu) + residue         (overlap: true; SGLang / TensorRT-LLM overlap schedulers)

A step that runs outside a captured graph (`EngineOverhead.graphed` false) also pays the profile's
eager GEMM floor where it has one (sim/inputs/engines/eager.py); graph replays never do.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from sim.inputs.engines.eager import eager_floor
from sim.inputs.engines.preset import CudaGraph, EnginePreset


def captured_sizes(graph: CudaGraph, max_num_seqs: int | None = None,
                   max_num_batched_tokens: int | None = None, max_size: int | None = None) -> tuple[int, ...]:
    """The batch sizes a run captures graphs for: the preset's listed sizes up to the run's cap.

    The cap is max_per_seq x max_num_seqs (vLLM V1, TensorRT-LLM), and also max_num_batched_tokens
    when `within_token_budget` (TensorRT-LLM: a pure decode batch of n sequences is n tokens); a limit
    the run does not give caps nothing. With `capture_cap`, the cap itself is captured when a listed
    size above it was dropped (TensorRT-LLM 1.0 with padding), so a batch between the largest listed
    size under the cap and the cap pads to the cap instead of running eager."""
    sizes = tuple(graph.capture_sizes)
    if max_size is not None:
        sizes = tuple(size for size in sizes if size <= max_size)
    caps = []
    if graph.max_per_seq is not None and max_num_seqs is not None:
        caps.append(graph.max_per_seq * max_num_seqs)
    if graph.within_token_budget and max_num_batched_tokens is not None:
        caps.append(max_num_batched_tokens)
    if not caps:
        return sizes
    cap = min(caps)
    kept = tuple(size for size in sizes if size <= cap)
    if graph.capture_cap and graph.padding and len(kept) < len(sizes) and (not kept or kept[-1] != cap):
        kept += (cap,)
    return kept


@dataclass(frozen=True)
class EngineOverhead:
    """The effective engine terms of one run (preset values after flag overrides), in seconds."""

    per_step_s: float
    per_seq_s: float
    per_token_s: float
    overlap: bool
    residue_s: float
    num_scheduler_steps: int
    capture_sizes: tuple[int, ...]
    graph_scope: str  # "decode" | "all"
    async_scheduling: bool = False  # arrivals join one step late (sim.engine.replica.Replica)
    frontend_s: float = 0.0  # the API server's request path (sim.engine.frontend)
    tokenize_s_per_token: float = 0.0  # one tokenizer process, per prompt token (sim.engine.frontend)
    graph_padding: bool = True  # false: only a batch of exactly a captured size replays a graph

    @classmethod
    def from_preset(cls, preset: EnginePreset, num_scheduler_steps: int | None = None,
                    enforce_eager: bool | None = None, max_num_seqs: int | None = None,
                    max_num_batched_tokens: int | None = None, graph_max_size: int | None = None) -> EngineOverhead:
        o = preset.overhead
        sizes = () if enforce_eager else captured_sizes(preset.cuda_graph, max_num_seqs, max_num_batched_tokens,
                                                         graph_max_size)
        return cls(o.per_step_us * 1e-6, o.per_seq_us * 1e-6, o.per_token_us * 1e-6, o.overlap, o.residue_us * 1e-6,
                   num_scheduler_steps or o.num_scheduler_steps, sizes, preset.cuda_graph.scope, o.async_scheduling,
                   o.frontend_ms * 1e-3, o.tokenize_us_per_token * 1e-6, preset.cuda_graph.padding)

    @classmethod
    def for_run(cls, preset: EnginePreset, cfg) -> EngineOverhead:
        """The terms of one run of `cfg` (an EngineConfig): its multi-step, eager and batch limits
        applied to the preset, as the simulation, the reported settings and the fits all take them."""
        return cls.from_preset(preset, cfg.num_scheduler_steps, cfg.enforce_eager, cfg.max_num_seqs,
                               cfg.max_num_batched_tokens, _graph_max_size(preset, cfg))

    def padded_size(self, size: int) -> int:
        """The captured graph size a step of `size` runs at (itself when beyond the largest, or unpadded)."""
        if not self.capture_sizes or size > self.capture_sizes[-1] or size <= 0 or not self.graph_padding:
            return size
        return self.capture_sizes[bisect.bisect_left(self.capture_sizes, size)]

    def graphed(self, size: int, decode_only: bool) -> bool:
        """Whether a step of `size` tokens replays a captured CUDA graph (else it runs eagerly)."""
        if not self.capture_sizes or size > self.capture_sizes[-1] or size <= 0:
            return False
        if not self.graph_padding and size not in self.capture_sizes:
            return False
        return decode_only or self.graph_scope == "all"

    def cpu_s(self, n_seqs, n_tokens, decode_only: bool):
        """Engine CPU seconds of a step (works on scalars and numpy arrays alike)."""
        scheduled = self.per_step_s + self.per_seq_s * n_seqs
        if decode_only:
            scheduled = scheduled / self.num_scheduler_steps
        return scheduled + self.per_token_s * n_tokens

    def combine(self, gpu_s, cpu_s):
        if self.overlap:
            return np.maximum(gpu_s, cpu_s) + self.residue_s
        return gpu_s + cpu_s


def _graph_max_size(preset: EnginePreset, cfg) -> int | None:
    """SGLang 0.5's cuda_graph_max_bs for the run's (first) GPU and tensor parallelism (None without tiers)."""
    if not preset.gpu_memory_tiers:
        return None
    from sim.inputs.engines.preset_rules import gpu_memory_tier
    from sim.inputs.hardware import load_hardware

    hbm_gib = load_hardware(cfg.hardware_of_replicas()[0]).memory.hbm_capacity_gib
    tier = gpu_memory_tier(preset.gpu_memory_tiers, hbm_gib)
    return None if tier is None else tier.graph_max_bs(cfg.tp)


class EngineCost:
    """A CostModel plus the engine's overhead; every other attribute is the wrapped model's."""

    def __init__(self, gpu, overhead: EngineOverhead):
        self.gpu, self.engine = gpu, overhead
        self._eager = eager_floor(gpu)  # None unless the profile measured an eager GEMM floor

    def __getattr__(self, name):
        return getattr(self.gpu, name)

    def _padding_s(self, size: int, decode_only: bool) -> float:
        """Extra GPU seconds of running a step of `size` tokens at its padded graph size."""
        if not decode_only and self.engine.graph_scope == "decode":
            return 0.0
        padded = self.engine.padded_size(size)
        if padded == size:
            return 0.0
        return self.gpu.model.n_layers * (self.gpu.layer_time_s(padded) - self.gpu.layer_time_s(size))

    def gpu_step_time_s(self, new_tokens: np.ndarray, cached_tokens: np.ndarray, n_sampled: int,
                        verify_tokens: int = 1) -> float:
        """The GPU's step time plus its graph padding. `verify_tokens` (speculative decoding: 1 + k): a
        step whose sequences bring at most that many tokens is a uniform decode step, run as a CUDA
        graph (vLLM captures decode graphs of uniform_decode_query_len = 1 + num_speculative_tokens)."""
        q = np.asarray(new_tokens, dtype=np.int64)
        decode_only = bool(q.size) and int(q.max()) <= verify_tokens
        size = int(q.sum())
        gpu_s = self.gpu.step_time_s(q, cached_tokens, n_sampled, verify_tokens) if verify_tokens > 1 else \
            self.gpu.step_time_s(q, cached_tokens, n_sampled)
        gpu_s += self._padding_s(size, decode_only)
        if self._eager is not None and not self.engine.graphed(size, decode_only):
            gpu_s += self._eager.step_s(size, n_sampled)
        return gpu_s

    def step_time_s(self, new_tokens: np.ndarray, cached_tokens: np.ndarray, n_sampled: int,
                    verify_tokens: int = 1) -> float:
        q = np.asarray(new_tokens, dtype=np.int64)
        decode_only = bool(q.size) and int(q.max()) <= verify_tokens
        gpu_s = self.gpu_step_time_s(q, cached_tokens, n_sampled, verify_tokens)
        n_seqs = int(np.count_nonzero(q))
        return float(self.engine.combine(gpu_s, self.engine.cpu_s(n_seqs, int(q.sum()), decode_only)))

    def decode_run(self, contexts: np.ndarray, n_steps: int) -> tuple[np.ndarray, np.ndarray]:
        times, block_tokens = self.gpu.decode_run(contexts, n_steps)
        n = int(np.asarray(contexts).shape[0])
        if n:
            times = times + self._padding_s(n, True)
            if self._eager is not None and not self.engine.graphed(n, True):
                times = times + self._eager.step_s(n, n)
        return self.engine.combine(times, self.engine.cpu_s(n, n, True)), block_tokens

    def decode_run_times_s(self, contexts: np.ndarray, n_steps: int) -> np.ndarray:
        return self.decode_run(contexts, n_steps)[0]
