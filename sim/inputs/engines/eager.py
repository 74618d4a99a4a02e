"""The host floor of GEMMs launched eagerly: what a step outside a captured CUDA graph pays on top.

An engine launches each kernel of an eager step from Python; a kernel shorter than the host's dispatch
time per launch then takes that time (the GPU waits for the host), while a graph replay launches the
whole captured step at once. A calibrated profile measures that floor (`efficiency.eager_gemm_floor_us`,
calibrate/fit_eager.py: eager timings = max(floor, kernel)). Per eager step, over the step's layers,
every dense projection GEMM (qkv, o, gate_up, down) and the LM head adds max(0, floor - its kernel
time). Applied to those GEMMs only: the floor was measured on them (other kernels keep their times).
Which steps are eager is the engine's: `EngineOverhead.graphed`.
"""

from __future__ import annotations

import numpy as np

FLOORED_OPS = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")


class EagerFloor:
    """Extra seconds of an eager step over its kernels' times, cached per token count."""

    def __init__(self, gpu, floor_us: float):
        self.gpu, self.floor_s = gpu, floor_us * 1e-6
        self._layer_s: dict[int, float] = {}
        self._lm_s: dict[int, float] = {}

    def layer_s(self, n_tokens: int) -> float:
        """Per layer: sum over the floored GEMMs of max(0, floor - kernel) at `n_tokens` rows."""
        if n_tokens not in self._layer_s:
            ops = self.gpu._layer_ops(np.array([float(n_tokens)]))
            self._layer_s[n_tokens] = float(sum(max(0.0, self.floor_s - float(op[1][0]))
                                                for op in ops if op[0] in FLOORED_OPS))
        return self._layer_s[n_tokens]

    def lm_head_s(self, n_sampled: int) -> float:
        if n_sampled not in self._lm_s:
            lm = float(self.gpu.lm_head_time_s(n_sampled)) if n_sampled > 0 else self.floor_s
            self._lm_s[n_sampled] = max(0.0, self.floor_s - lm) if n_sampled > 0 else 0.0
        return self._lm_s[n_sampled]

    def step_s(self, n_tokens: int, n_sampled: int) -> float:
        """Extra seconds of one eager step of `n_tokens` tokens sampling `n_sampled`."""
        if n_tokens <= 0:
            return 0.0
        return self.gpu.model.n_layers * self.layer_s(n_tokens) + self.lm_head_s(n_sampled)


def eager_floor(gpu) -> EagerFloor | None:
    """The floor term of `gpu` (a CostModel), or None when its profile has none (or it has no profile:
    a stand-in GPU of given step times)."""
    hw = getattr(gpu, "hw", None)
    floor_us = None if hw is None else hw.efficiency.eager_gemm_floor_us
    return None if not floor_us else EagerFloor(gpu, floor_us)
