"""Expert parallelism (EP) in the MoE cost: routed experts sharded over the MoE layer's GPUs, with
an all-to-all dispatch before them and a combine after.

**What one GPU does per MoE layer** (`ExpertParallelCostModel`, one attention rank's view):
- the step's attention-side work (attention, projections, dense and shared-expert MLPs, router,
  LM head, the attention group's all-reduces) for the rank's own tokens T, on the rank's
  `attention_tp` GPUs: the TP cost model of `attention_tp` GPUs, unchanged;
- the routed experts it holds, n / ep of them, for the tokens routed to them: the MoE layer sees
  every attention rank's tokens, T_moe = T x `token_ranks` (data-parallel attention: the ranks'
  batches meet in the MoE layer; the other ranks are taken to carry as many tokens as this one,
  and sim/engine/lockstep.py re-prices the MoE part on what the ranks actually hold each step),
  of which a GPU receives T_moe x k / ep token-expert pairs on average and `load_imbalance` times
  that on the busiest GPU, which the step waits for;
- the distinct experts it touches: (n / ep)(1 - (1 - k/n)^T_moe) (uniform routing; a small decode
  batch reads few of its experts, a large one all of them); with r redundant expert copies (EPLB,
  SGLang `--ep-num-redundant-experts`) a GPU holds (n + r) / ep slots, each taking k / (n + r) of
  the tokens (a replicated expert's tokens split over its copies): more weights to read, the same
  token-expert pairs;
- `moe_dispatch` and `moe_combine` (bound `network`): each GPU sends its T_moe / moe_group tokens
  times top-k (`sim.cost.all_to_all.a2a_payload_bytes`), stretched by `load_imbalance` (the busiest
  GPU receives that much more), priced by `all_to_all_time_s` with the profile's fits (inside one
  scale-up domain or across, from the EP size and `interconnect.scale_up_domain_gpus`).

**Backends** (`moe_a2a_backend`, SGLang's `--moe-a2a-backend`): `deepep` with `deepep_mode`
(SGLang's `--deepep-mode`): `normal` (high-throughput kernels), `low_latency`, or `auto`: low-latency
kernels while a GPU dispatches at most `DEEPEP_LL_MAX_TOKENS_PER_RANK` tokens (SGLang's default
`SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK`, the low-latency buffer's size), normal above.
`nccl`: NCCL all-to-all (the profile's fit, else the alpha-beta exchange at line rates). Dispatch
travels in FP8 with one fp32 scale per 128 channels when the routed experts are FP8 or narrower
(DeepEP's FP8 dispatch), else in the activation dtype; combine in the activation dtype.
`allgather_reducescatter` (vLLM's all2all backend of that name): dispatch is an all-gather of every
rank's tokens and combine a reduce-scatter of every GPU's partial outputs (`_allgather`), what
TensorRT-LLM's attention-DP MoE does on boards without MNNVL: its fused MoE enables an all-to-all
only where `MnnvlMemory.supports_mnnvl()` (NVL72 racks) or DeepEP is opted into
(tensorrt_llm/_torch/modules/fused_moe/fused_moe_cutlass.py, `enable_alltoall`, 1.0), so on an 8-GPU
HGX / DGX board every GPU receives the whole MoE batch: ep / top_k times an all-to-all's bytes
(8x for Llama-4's top-1 over 8 GPUs, 1x for Qwen3's top-8).

**Expert GEMMs** (`_experts_op`): ceiling(op) x M / (M + half(op)) of peak with M the rows per touched
expert (sim.cost.roofline.gemm_compute_efficiency), so their compute is proportional to pairs + half x
experts touched. `deepep` runs DeepGEMM's grouped GEMMs: the profile's `experts_deepgemm` ramp (derived
from DeepGEMM's published throughputs) where it has one; otherwise `experts_ep` (fitted on TensorRT-LLM
EP rows), else `experts`.

**Load imbalance** (`moe_load_imbalance`, else the model's `moe.load_imbalance`, 1.0): max / mean
tokens per EP GPU. 1.0 is perfect balance, what EPLB with redundant experts aims at (DeepSeek-V3
report, arXiv:2412.19437 sec. 3.4); the published cost of imperfect balance, SGLang's DeepSeek-V3
prefill on 4 x 8 H100 (EP32, blog 2025-05-05 "large-scale EP"): 50,302 tok/s per node with the
default expert placement vs 59,337 with simulated perfect EPLB, a 1.18x slower step (a whole-step
figure: the experts' share of it was stretched more). docs/parallelism.md.

**Two-batch overlap** (`enable_two_batch_overlap`, SGLang's `--enable-two-batch-overlap`, after
DeepSeek's profile-data design): the step's batch runs as two micro-batches, one's dispatch and
combine hidden behind the other's compute; priced as the all-to-all time beyond the MoE layer's
token-dependent compute (GEMMs, elementwise; attention not counted as cover). The halved GEMM
sizes are not re-priced.

Not modelled (refused where a knob would name them): EP over part of the MoE group (experts also
tensor-split); what EPLB's placement does to `load_imbalance` (give it: docs/parallelism.md).
Ranks running unequal batches wait for each other: sim/engine/lockstep.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.cost.all_to_all import a2a_payload_bytes, all_to_all_fit, all_to_all_time_s, allgather_reducescatter_time_s
from sim.cost.model import CostModel
from sim.cost.roofline import gemm_compute_efficiency, op_time_s
from sim.errors import InputError
from sim.inputs.dtypes import bytes_per_element
from sim.inputs.layout.parallel import ReplicaLayout
from sim.inputs.model import ModelSpec

# config names (SGLang's --moe-a2a-backend deepep; nccl; vLLM's all2all backend allgather_reducescatter)
MOE_A2A_BACKENDS = ("nccl", "deepep", "allgather_reducescatter")
ALLGATHER = "allgather_reducescatter"
DEEPEP_MODES = ("auto", "normal", "low_latency")  # SGLang's --deepep-mode
DEEPEP_LL_MAX_TOKENS_PER_RANK = 128  # SGLang's SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK default
FP8_DISPATCH_SCALE_CHANNELS = 128  # DeepEP FP8 dispatch: one fp32 scale per 128 channels
# the profile's ceiling of expert-parallel grouped GEMMs (`efficiency.gemm_compute_max_by_op`), where it
# has one of its own (fitted on EP runs), else the `experts` one
EP_EXPERTS_OP = "experts_ep"
# DeepEP's dispatch feeds DeepGEMM's grouped GEMMs (contiguous layout after normal kernels, masked after
# low-latency ones: SGLang's DeepEP MoE path): their own ramp where the profile has one (from DeepGEMM's tables)
DEEPGEMM_EXPERTS_OP = "experts_deepgemm"
MOE_OP_NAMES = ("moe_mlp", "moe_dispatch", "moe_combine")  # the ops of a step that see every rank's tokens


@dataclass(frozen=True)
class ExpertParallelism:
    """The EP facts of one replica layout the MoE cost needs."""

    ep: int  # GPUs the routed experts are sharded over (the whole MoE group)
    moe_group: int  # GPUs one MoE layer spans
    token_ranks: int  # attention ranks whose tokens meet in a MoE layer
    backend: str = "nccl"  # MOE_A2A_BACKENDS
    deepep_mode: str = "auto"  # DEEPEP_MODES
    load_imbalance: float = 1.0  # max / mean tokens per EP GPU
    two_batch_overlap: bool = False  # SGLang --enable-two-batch-overlap
    n_redundant_experts: int = 0  # extra expert slots (SGLang --ep-num-redundant-experts)

    @classmethod
    def of(cls, layout: ReplicaLayout, backend: str = "nccl", deepep_mode: str = "auto",
           load_imbalance: float = 1.0, two_batch_overlap: bool = False) -> ExpertParallelism:
        if backend not in MOE_A2A_BACKENDS:
            raise InputError("--moe-a2a-backend", backend, " | ".join(MOE_A2A_BACKENDS))
        if deepep_mode not in DEEPEP_MODES:
            raise InputError("--deepep-mode", deepep_mode, " | ".join(DEEPEP_MODES))
        if not np.isfinite(load_imbalance) or load_imbalance < 1.0:
            raise InputError("moe_load_imbalance", None,
                             f"max / mean tokens per EP GPU: a number >= 1 (got {load_imbalance})")
        ep = layout.expert_parallel_size
        if ep != layout.moe_group:
            raise InputError("--ep", None,
                             f"{ep}: expert parallelism over part of the MoE layer's {layout.moe_group} GPUs "
                             "(experts also tensor-split) is not simulated: give --ep equal to tp x dp")
        return cls(ep, layout.moe_group, layout.n_kv_ranks, backend, deepep_mode, float(load_imbalance),
                   bool(two_batch_overlap), layout.n_redundant_experts)

    def a2a_kernels(self) -> tuple[str, ...]:
        """The all-to-all backends (sim.inputs.hardware.A2A_BACKENDS) steps may use."""
        if self.backend in ("nccl", ALLGATHER):
            return (self.backend,)
        return {"normal": ("deepep_normal",), "low_latency": ("deepep_low_latency",)}.get(
            self.deepep_mode, ("deepep_low_latency", "deepep_normal"))


class ExpertParallelCostModel(CostModel):
    """Step times of one attention rank of an EP / DP-attention replica (module docstring): a TP
    cost model of `layout.attention_tp` GPUs whose routed experts are priced expert-parallel."""

    def __init__(self, model: ModelSpec, hw, layout: ReplicaLayout, *args, expert_parallel: ExpertParallelism,
                 **kwargs):
        if model.moe is None:
            raise InputError("--ep", None, "expert parallelism needs a MoE model")
        if (model.n_experts + expert_parallel.n_redundant_experts) % expert_parallel.ep:
            raise InputError("--ep", None, f"{expert_parallel.ep} must divide the model's {model.n_experts} routed "
                             f"experts plus {expert_parallel.n_redundant_experts} redundant ones")
        super().__init__(model, hw, layout.attention_tp, *args, **kwargs)
        self.layout, self.expert_parallel = layout, expert_parallel
        for kernel in expert_parallel.a2a_kernels():  # refuse a missing DeepEP fit now, not mid-run
            if kernel not in ("nccl", ALLGATHER) and all_to_all_fit(hw, expert_parallel.ep, kernel, "dispatch") is None:
                all_to_all_time_s(hw, expert_parallel.ep, np.ones(1), kernel, "dispatch")  # raises its one line
        g = self.group_gemm["experts"] if self.group_gemm is not None else None
        self._experts_bytes_el = g.bytes_el if g else self.weight_bytes_el
        self._experts_peak, self._experts_eff = (g.peak_flops, g.eff) if g else (self.peak_flops, self.eff)
        fp8 = bytes_per_element("fp8", "--weight-dtype")
        if self._experts_bytes_el <= fp8:
            scale = bytes_per_element("fp32", "--weight-dtype") * model.hidden_size / FP8_DISPATCH_SCALE_CHANNELS
            self._dispatch_el, self._dispatch_scale = fp8, scale
        else:
            self._dispatch_el, self._dispatch_scale = self.act_bytes_el, 0.0
        self._moe_group_table_s = np.zeros(0)

    def moe_group_layer_s(self, n_moe_tokens: int) -> float:
        """Per-layer time of the MoE part of a step (routed experts, dispatch, combine as priced by
        `_layer_ops`) when the MoE layer sees `n_moe_tokens` from all attention ranks, each carrying
        an equal share: `_layer_ops(n_moe_tokens / token_ranks)`'s MoE ops, from a lazily grown
        table (ranks in lockstep re-price their MoE layers on what every rank holds: sim.engine.lockstep)."""
        table = self._moe_group_table_s
        if n_moe_tokens >= table.shape[0]:
            grid = np.arange(max(2 * n_moe_tokens + 1, 1024), dtype=np.float64)
            ops = self._layer_ops(grid / self.expert_parallel.token_ranks)
            table = self._moe_group_table_s = sum(op[1] for op in ops if op[0] in MOE_OP_NAMES)
        return float(table[n_moe_tokens])

    def _layer_ops(self, n_tokens: np.ndarray):
        tokens = np.asarray(n_tokens, dtype=np.float64)
        share = self.model.n_moe_layers / self.model.n_layers
        ops = [op for op in super()._layer_ops(tokens) if op[0] != "moe_mlp"]
        moe_tokens = tokens * self.expert_parallel.token_ranks
        ops.append(_scaled(self._routed_ep(moe_tokens), share))
        a2a = [_scaled(self._a2a(moe_tokens, phase), share) for phase in ("dispatch", "combine")]
        if self.expert_parallel.two_batch_overlap:
            a2a = _overlapped(a2a, sum(op[1] for op in ops))
        return ops + a2a

    def _routed_ep(self, moe_tokens: np.ndarray):
        """The routed experts one GPU holds, for the busiest GPU's share of the MoE tokens."""
        m, xp = self.model, self.expert_parallel
        n, k = m.n_experts, m.n_active_experts
        slots = n + xp.n_redundant_experts  # a replicated expert's tokens are shared by its copies
        held = slots // xp.ep
        touched = held * (1.0 - (1.0 - k / slots) ** moe_tokens)
        pairs = moe_tokens * k / xp.ep * xp.load_imbalance
        elems = m.expert_params
        flops = 2.0 * pairs * elems
        act_bytes = pairs * (2 * m.hidden_size + 3 * m.expert_intermediate_size) * self.act_bytes_el
        bytes_ = touched * elems * self._experts_bytes_el + act_bytes
        op = self._experts_op()
        e_c = gemm_compute_efficiency(np.maximum(pairs / np.maximum(touched, 1e-300), 1.0), self._experts_eff, op=op)
        time, t_c, t_m = op_time_s(flops, bytes_, self._experts_peak, e_c, self.bandwidth, self._experts_eff.memory,
                                   self._experts_eff, 3)
        time = np.where(moe_tokens > 0, time, 0.0) * self.time_scale["gemm"]
        return "moe_mlp", time, flops, bytes_, np.where(t_c >= t_m, "compute", "memory")

    def _experts_op(self) -> str:
        """The GEMM op class whose ceiling and ramp price the routed experts: DeepGEMM's behind DeepEP,
        else the profile's expert-parallel one, else the MoE grouped GEMM's (`experts`)."""
        eff = self._experts_eff
        own = {**(eff.gemm_compute_max_by_op or {}), **(eff.gemm_half_tokens_by_op or {})}
        if self.expert_parallel.backend == "deepep" and DEEPGEMM_EXPERTS_OP in own:
            return DEEPGEMM_EXPERTS_OP
        return EP_EXPERTS_OP if EP_EXPERTS_OP in own else "experts"

    def _a2a(self, moe_tokens: np.ndarray, phase: str):
        xp, m = self.expert_parallel, self.model
        if xp.backend == ALLGATHER:
            return self._allgather(moe_tokens, phase)
        per_gpu = moe_tokens / xp.moe_group
        if phase == "dispatch":
            payload = a2a_payload_bytes(per_gpu, m.n_active_experts, m.hidden_size, self._dispatch_el,
                                        self._dispatch_scale)
        else:
            payload = a2a_payload_bytes(per_gpu, m.n_active_experts, m.hidden_size, self.act_bytes_el)
        payload = payload * xp.load_imbalance
        kernels = xp.a2a_kernels()
        time = all_to_all_time_s(self.hw, xp.ep, payload, kernels[0], phase)
        if len(kernels) == 2:  # deepep auto: low-latency kernels up to their buffer's tokens, normal above
            normal = all_to_all_time_s(self.hw, xp.ep, payload, kernels[1], phase)
            time = np.where(per_gpu <= DEEPEP_LL_MAX_TOKENS_PER_RANK, time, normal)
        time = time * self.time_scale["collective"]
        return f"moe_{phase}", time, np.zeros_like(payload), payload, np.full(payload.shape, "network")


    def _allgather(self, moe_tokens: np.ndarray, phase: str):
        """Dispatch as an all-gather of every rank's tokens (hidden state in the dispatch dtype with its
        scales, plus each token's top-k expert ids and weights, 4 bytes each), combine as a reduce-scatter
        of every GPU's partial outputs in the activation dtype: the whole MoE batch either way, whatever
        the top-k, and not stretched by load imbalance (every GPU gets every token)."""
        m = self.model
        if phase == "dispatch":
            routing = 2 * m.n_active_experts * bytes_per_element("fp32", "--weight-dtype")  # int32 ids, fp32 weights
            buffer = moe_tokens * (m.hidden_size * self._dispatch_el + self._dispatch_scale + routing)
        else:
            buffer = moe_tokens * m.hidden_size * self.act_bytes_el
        time = allgather_reducescatter_time_s(self.hw, self.expert_parallel.ep, buffer, phase)
        time = time * self.time_scale["collective"]
        return f"moe_{phase}", time, np.zeros_like(buffer), buffer, np.full(buffer.shape, "network")


def _overlapped(a2a: list[tuple], compute_s: np.ndarray) -> list[tuple]:
    """Two-batch overlap: the all-to-alls run while the other micro-batch computes, so only the
    part longer than the layer's token-dependent compute shows (attention, priced elsewhere, is
    not counted as cover: the conservative side); each phase keeps its share of what shows."""
    total_s = a2a[0][1] + a2a[1][1]
    exposed = np.where(total_s > 0, np.maximum(total_s - compute_s, 0.0) / np.where(total_s > 0, total_s, 1.0), 0.0)
    return [(name, time * exposed, flops, bytes_, bound) for name, time, flops, bytes_, bound in a2a]


def _scaled(op: tuple, share: float) -> tuple:
    name, time, flops, bytes_, bound = op
    if share == 1:
        return op
    return name, time * share, flops * share, bytes_ * share, bound


def expert_parallelism_of(cfg, model, layout: ReplicaLayout):
    """The MoE all-to-all facts of a simulated EP layout, None without EP."""
    if not layout.uses_expert_parallel:
        return None
    imbalance = cfg.moe_load_imbalance if cfg.moe_load_imbalance is not None else model.moe.load_imbalance
    return ExpertParallelism.of(layout, cfg.moe_a2a_backend, cfg.deepep_mode, imbalance, cfg.enable_two_batch_overlap)
