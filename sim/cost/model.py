"""The roofline cost model of one replica (a TP group): per-op FLOPs, bytes, time and bound.

`CostModel` answers two questions:
- `breakdown(new_tokens, cached_tokens)`: every op of one step, for people (tables, plots).
- `step_time_s(...)` / `decode_run_times_s(...)`: the total only, on the simulator's hot path.
Both come from the same formulas (`_layer_ops` with sim/cost/layer_ops.py, sim/cost/attention_ops.py,
`_lm_head_op`), vectorized over steps, so the fast path cannot drift from the explained one.
"""

from __future__ import annotations

import numpy as np

from sim.cost.arch import (
    arch_gemm,
    arch_gemm_shapes,
    arch_layer_ops,
    group_gemm_dtypes,
    model_main_dtype,
    needs_arch_ops,
)
from sim.cost.attention_ops import attention_ops, window_ops
from sim.cost.attention_tables import attention_tables
from sim.cost.collectives import allreduce_fits, engine_allreduce, link_time_s
from sim.cost.gemm_grid import gemm_grid, held_at_roofline_s, measured_table
from sim.cost.hot import HotPath
from sim.cost.layer_ops import elementwise_op, moe_op
from sim.cost.mla import mla_context_shape, mla_kv_elements_per_token, mla_pair_flops
from sim.cost.roofline import allreduce_time_s, gemm_time_s
from sim.cost.shapes import attention_load
from sim.cost.step_cost import OpCost, StepCost, op_bound
from sim.cost.tables import gemm_tables
from sim.cost.time_scale import checked_time_scale
from sim.cost.topology import scale_out_allreduce_s, tp_scale_out
from sim.cost.window import Window
from sim.inputs.dtypes import bytes_per_element, dequant_compute_factor, kv_bytes_per_element, peak_key
from sim.inputs.hardware import HardwareProfile
from sim.inputs.model import ModelSpec
from sim.inputs.model.kv import window_kept_blocks
from sim.inputs.model.weights import uniform_dtype


class CostModel:
    """Step times of one replica of `model` on `tp` GPUs of `hw`.

    `allreduce_kind`: `nccl` or `custom` (one-shot kernels of vLLM / TensorRT-LLM), read from the
    profile's `collectives` (engine presets pick it); `nvlink_bridge`: a TP-2 pair of PCIe cards
    joined by an NVLink bridge. `time_scale`: a multiplier per op class (sim/cost/time_scale.py) on
    every time of that class, what the prediction intervals perturb (sim/cost/uncertainty.py).
    GEMM shapes found in the profile's measured tables (`calibration.tables`: exact shapes, then the
    imported M x N x K grid, sim/cost/gemm_grid.py) use them.
    """

    def __init__(
        self,
        model: ModelSpec,
        hw: HardwareProfile,
        tp: int = 1,
        weight_dtype: str = "bf16",
        kv_dtype: str = "bf16",
        block_size: int = 16,
        act_dtype: str = "bf16",
        allreduce_kind: str = "nccl",
        nvlink_bridge: bool = False,
        time_scale: dict[str, float] | None = None,
        step_overhead_s: float | None = None,
        allreduce_rule=None,
    ):
        """`step_overhead_s`: a constant added to every step. None keeps the hardware profile's
        legacy `efficiency.step_overhead_us`; an engine preset passes 0 and prices the engine's CPU
        work itself (`sim.inputs.engines.overhead.EngineCost`)."""
        model.check_tp(tp)
        self.model, self.hw, self.tp, self.block_size = model, hw, tp, block_size
        # models beyond the uniform dense / Mixtral stack (sim/cost/arch.py): None for those
        self.group_gemm = group_gemm_dtypes(model, hw, weight_dtype) if needs_arch_ops(model, weight_dtype) else None
        self.requested_weight_dtype = weight_dtype  # as given (`auto` included), for derived cost models
        weight_dtype = uniform_dtype(model, weight_dtype) or weight_dtype  # `auto` of a bf16 model: bf16
        if self.group_gemm is None:
            self.eff = hw.efficiency.for_weight_dtype(weight_dtype)  # GEMM ceiling of this weight dtype
            self.weight_bytes_el = bytes_per_element(weight_dtype, "--weight-dtype")
            # weight-only formats (int4 AWQ/GPTQ) run bf16 math, stretched by their dequantization work
            self.peak_flops = (hw.peak_flops(peak_key(weight_dtype, "--weight-dtype"))
                               / dequant_compute_factor(weight_dtype, "--weight-dtype"))
        else:  # per-group dtypes: the main group's efficiency terms; floors: the least bytes, highest peak
            weight_dtype = model_main_dtype(model, weight_dtype)
            self.eff = self.group_gemm["experts" if model.moe is not None else "dense_mlp"].eff
            self.weight_bytes_el = min(g.bytes_el for g in self.group_gemm.values())
            self.peak_flops = max(g.peak_flops for g in self.group_gemm.values())
        self.kv_bytes_el = kv_bytes_per_element(kv_dtype, "--kv-dtype")
        self.act_bytes_el = bytes_per_element(act_dtype, "--act-dtype")
        self.weight_dtype, self.kv_dtype = weight_dtype, kv_dtype
        self.attn_peak_flops = hw.peak_flops(peak_key(act_dtype, "--act-dtype"))
        self.bandwidth = hw.hbm_bandwidth_bytes_s
        self.q_heads_gpu = model.n_heads // tp
        self.kv_heads_gpu = model.kv_heads_per_gpu(tp)
        self.kv_bytes_per_token_layer_gpu = 2 * self.kv_heads_gpu * model.head_dim * self.kv_bytes_el
        # attention FLOPs per causal query-key pair on this GPU (MLA: sim/cost/mla.py)
        self.pair_flops = {"prefill_attention": 4.0 * model.head_dim * self.q_heads_gpu,
                           "decode_attention": 4.0 * model.head_dim * self.q_heads_gpu}
        if model.mla is not None:
            self.kv_bytes_per_token_layer_gpu = mla_kv_elements_per_token(model) * self.kv_bytes_el
            self.pair_flops = mla_pair_flops(model, self.q_heads_gpu)
        self.mla_context = mla_context_shape(model, self.q_heads_gpu) if model.mla is not None else None
        self.time_scale = checked_time_scale(time_scale)
        base_overhead_s = self.eff.step_overhead_us * 1e-6 if step_overhead_s is None else step_overhead_s
        self.overhead_s = base_overhead_s * self.time_scale["overhead"]
        # Attention time scales as 1/rate: dividing both rates by the factor scales the blend.
        self.attn_peak_flops /= self.time_scale["attention"]
        self._paged_eff = self.eff.paged_efficiency(block_size) / self.time_scale["attention"]
        self.tables = gemm_tables(hw.calibration, hw.name)
        self.gemm_grid = gemm_grid(hw.calibration, hw.name)  # measured M x N x K grid (imported), or None
        self.grid_curves: dict = {}  # the grid's M curve per (dtype, N, K, op), built on first use
        attn = attention_tables(hw.calibration, hw.name)
        head_key = (self.q_heads_gpu, self.kv_heads_gpu, model.head_dim, int(self.kv_bytes_el))
        # measured/smooth ratio tables of this head shape (None: the smooth model alone answers)
        self.prefill_ratio = attn.get(("prefill_attention", *head_key, None))
        self.decode_ratio = attn.get(("decode_attention", *head_key, block_size))
        self.window = None  # sliding / chunked layers: their attention is bounded by the window
        if model.is_hybrid_attention:
            self.window = Window(model.window_tokens, window_kept_blocks(model, block_size) * block_size, block_size)
            self.full_attention_share = model.n_layers_of("full") / model.n_layers
        self.allreduce_kind = allreduce_kind
        self.allreduce_rule = allreduce_rule  # kept for costs built beside this one (the MTP module's)
        # a TP group beyond the scale-up domain all-reduces hierarchically (sim/cost/topology.py):
        # the domain's own NCCL all-reduce over its GPUs (one-shot custom kernels need one NVLink
        # domain: vLLM disables them for a group that spans nodes), then the scale-out ring
        self._scale_out = tp_scale_out(hw, tp)
        self._allreduce_group = tp if self._scale_out is None else self._scale_out.gpus_per_domain
        kind = allreduce_kind if self._scale_out is None else "nccl"
        # allreduce_kind "engine": the preset's rule (`allreduce_rule`, a CustomAllreduce) picks per message
        self._engine_allreduce = engine_allreduce(hw, tp, allreduce_rule) if kind == "engine" else None
        self._allreduce_fits = [] if self._engine_allreduce else allreduce_fits(hw, self._allreduce_group, kind,
                                                                                nvlink_bridge)
        self._layer_table_s = np.zeros(0)
        self._lm_table_s = np.zeros(0)
        self._hot = HotPath(self)

    # ---------------------------------------------------------------- formulas
    def _gemm_shapes(self) -> list[tuple[str, int, int]]:
        """(name, N, K) per TP shard for the dense projections of one layer."""
        m, t = self.model, self.tp
        if self.group_gemm is not None:
            return arch_gemm_shapes(self)
        d = m.head_dim
        mlp_up = (2 if m.mlp == "gated" else 1) * m.intermediate_size // t
        shapes = [
            ("qkv_proj", (self.q_heads_gpu + 2 * self.kv_heads_gpu) * d, m.hidden_size),
            ("o_proj", m.hidden_size, self.q_heads_gpu * d),
        ]
        if m.moe is None:
            shapes += [("gate_up_proj", mlp_up, m.hidden_size), ("down_proj", m.hidden_size, m.intermediate_size // t)]
        return shapes

    def _gemm(self, tokens: np.ndarray, n_out: int, k_in: int, op: str | None = None):
        """(time, flops, bytes) of one GEMM of op class `op`: its measured table when the profile has
        this shape, else the smooth roofline; scaled by the `gemm` time scale. A measured time is held at
        the datasheet roofline (`held_at_roofline_s`)."""

        def smooth_nk(m, n, k):
            return gemm_time_s(m, n, k, self.weight_bytes_el, self.act_bytes_el, self.peak_flops,
                               self.bandwidth, self.eff, op)[0]  # fmt: skip

        time, flops, bytes_ = gemm_time_s(
            tokens, n_out, k_in, self.weight_bytes_el, self.act_bytes_el, self.peak_flops, self.bandwidth, self.eff, op
        )
        table = measured_table(self, n_out, k_in, self.weight_dtype, self.weight_bytes_el, smooth_nk, op)
        if table is not None:
            time = held_at_roofline_s(table.time_at_s(tokens, lambda m: smooth_nk(m, n_out, k_in)), flops, bytes_,
                                      self.peak_flops, self.bandwidth)
        return time * self.time_scale["gemm"], flops, bytes_

    def _allreduce_s(self, payload: np.ndarray) -> np.ndarray:
        """One all-reduce of `payload` bytes: the profile's fitted collective, else the ring formula."""
        if self._engine_allreduce is not None and self._engine_allreduce[1] is not None:
            custom, nccl, max_bytes = self._engine_allreduce
            nccl_s = link_time_s(payload, nccl)
            return nccl_s if custom is None else np.where(payload < max_bytes, link_time_s(payload, custom), nccl_s)
        if self._allreduce_fits:
            return np.minimum.reduce([link_time_s(payload, fit) for fit in self._allreduce_fits])
        latency = self.hw.interconnect.gpu_link_latency_us * 1e-6
        return allreduce_time_s(payload, self._allreduce_group, self.hw.gpu_link_bytes_s, latency, self.eff)

    def _layer_ops(self, n_tokens: np.ndarray) -> list[tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """Per-layer ops whose cost depends only on the step's token count: (name, time, flops, bytes, bound)."""
        tokens = np.asarray(n_tokens, dtype=np.float64)
        ops = []
        if self.group_gemm is not None:
            ops = arch_layer_ops(self, tokens)
        for name, n_out, k_in in ([] if self.group_gemm is not None else self._gemm_shapes()):
            time, flops, bytes_ = self._gemm(tokens, n_out, k_in, name)
            t_c = flops / self.peak_flops
            ops.append((name, time, flops, bytes_, op_bound(t_c, bytes_ / self.bandwidth)))
        if self.model.moe is not None and self.group_gemm is None:
            ops.append(moe_op(self, tokens))
        ops.append(elementwise_op(self, tokens))
        if self.tp > 1:
            payload = tokens * self.model.hidden_size * self.act_bytes_el
            time = 2 * self._allreduce_s(payload) * self.time_scale["collective"]
            ops.append(("allreduce", time, np.zeros_like(tokens), 2 * payload, np.full(tokens.shape, "network")))
            if self._scale_out is not None:
                time = 2 * scale_out_allreduce_s(payload, self._scale_out) * self.time_scale["collective"]
                shard_bytes = 2 * payload / self._scale_out.gpus_per_domain
                ops.append(("allreduce_scale_out", time, np.zeros_like(tokens), shard_bytes,
                            np.full(tokens.shape, "network")))
        return ops

    def mla_context_op(self, context_tokens: np.ndarray):
        """MLA only: the kv_b up-projection of the cached latents of a step's prefill sequences
        (`context_tokens`: their cached tokens, summed per step), sim/cost/mla.py."""
        n_out, k_in = self.mla_context
        tokens = np.asarray(context_tokens, dtype=np.float64)
        time, flops, bytes_, bound = arch_gemm(self, tokens, n_out, k_in, "kv_b_proj", "attention")
        return ("kv_b_proj_context", np.where(tokens > 0, time, 0.0), flops, bytes_, bound)

    def _lm_head_op(self, n_sampled: np.ndarray):
        m = self.model
        sampled = np.asarray(n_sampled, dtype=np.float64)
        if self.group_gemm is not None:  # the LM head in the checkpoint's embedding dtype
            time, flops, bytes_, bound = arch_gemm(self, sampled, m.vocab_size // self.tp, m.hidden_size, "lm_head",
                                                   "embedding")
            return ("lm_head", time, flops, bytes_, bound)
        time, flops, bytes_ = self._gemm(sampled, m.vocab_size // self.tp, m.hidden_size, "lm_head")
        t_c = flops / self.peak_flops
        return ("lm_head", time, flops, bytes_, op_bound(t_c, bytes_ / self.bandwidth))

    # ---------------------------------------------------------------- for people
    def decode_query_max(self, verify_tokens: int) -> int:
        """The most new tokens a sequence may bring and still take the decode attention kernel, in a
        step whose decoding sequences each verify `verify_tokens` (1 without speculation). MLA: the
        verify tokens run on the absorbed decode kernel (vLLM's MLA backends raise their
        reorder_batch_threshold to 1 + num_speculative_tokens, `_init_reorder_batch_threshold(...,
        supports_spec_as_decode=True)` in vllm/v1/attention/backend.py; SGLang's MLA backends build
        decode metadata with seqlen_q = draft tokens for TARGET_VERIFY), so their cached latents are
        not re-expanded. Other attention: 1 (prefill and decode pairs are priced alike there)."""
        return verify_tokens if self.mla_context is not None else 1

    def breakdown(self, new_tokens, cached_tokens, n_sampled: int | None = None, verify_tokens: int = 1) -> StepCost:
        """Every op of one step for sequences bringing `new_tokens` over `cached_tokens` each;
        `verify_tokens`: see `decode_query_max`."""
        q = np.atleast_1d(np.asarray(new_tokens, dtype=np.int64))
        c = np.atleast_1d(np.asarray(cached_tokens, dtype=np.int64))
        sampled = len(q) if n_sampled is None else n_sampled
        decode_max = self.decode_query_max(verify_tokens)
        load = attention_load(q, c, self.block_size, decode_max)
        rows = self._layer_ops(np.array([q.sum()])) + attention_ops(self, load) + window_ops(self, q, c)
        if self.mla_context is not None:
            rows.append(self.mla_context_op(np.array([float(c[q > decode_max].sum())])))
        ops = [
            OpCost(n, float(t[0]), float(f[0]), float(b[0]), str(bd[0]), True)
            for n, t, f, b, bd in rows
            if t[0] > 0
        ]
        n, t, f, b, bd = self._lm_head_op(np.array([sampled]))
        ops.append(OpCost(n, float(t[0]), float(f[0]), float(b[0]), str(bd[0]), False))
        return StepCost(ops=ops, n_layers=self.model.n_layers, overhead_s=self.overhead_s)

    # ---------------------------------------------------------------- hot path
    def layer_time_s(self, n_tokens: int) -> float:
        """Per-layer time of the token-count-dependent ops, from a lazily grown lookup table."""
        if n_tokens >= self._layer_table_s.shape[0]:
            grid = np.arange(max(2 * n_tokens + 1, 1024), dtype=np.float64)
            self._layer_table_s = sum(op[1] for op in self._layer_ops(grid))
        return float(self._layer_table_s[n_tokens])

    def lm_head_time_s(self, n_sampled: int) -> float:
        if n_sampled >= self._lm_table_s.shape[0]:
            grid = np.arange(max(2 * n_sampled + 1, 1024), dtype=np.float64)
            self._lm_table_s = self._lm_head_op(grid)[1]
        return float(self._lm_table_s[n_sampled])

    def step_time_s(self, new_tokens: np.ndarray, cached_tokens: np.ndarray, n_sampled: int,
                    verify_tokens: int = 1) -> float:
        """Total time of one step (equals `breakdown(...).time_s`)."""
        q = np.asarray(new_tokens, dtype=np.int64)
        c = np.asarray(cached_tokens, dtype=np.int64)
        decode_max = self.decode_query_max(verify_tokens)
        if decode_max > 1:
            return self._hot.total_s(self._hot.verify_parts(q, c, decode_max), int(n_sampled))
        return self._hot.step_time_s(q, c, int(n_sampled))

    def decode_run_times_s(self, contexts: np.ndarray, n_steps: int) -> np.ndarray:
        """Times of `n_steps` consecutive pure-decode steps: every sequence (cached `contexts`
        tokens before the first) gains one token per step and samples one token per step."""
        return self._hot.decode_run(np.asarray(contexts, dtype=np.int64), int(n_steps))[0]

    def decode_run(self, contexts: np.ndarray, n_steps: int) -> tuple[np.ndarray, np.ndarray]:
        """`decode_run_times_s` plus the KV tokens (whole blocks) the run's sequences hold per step."""
        return self._hot.decode_run(np.asarray(contexts, dtype=np.int64), int(n_steps))
