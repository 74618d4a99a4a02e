"""The extra step time of the LoRA kernels of a batch that names adapters (docs/lora.md).

vLLM runs each LoRA-wrapped linear as two punica-style grouped kernels over the whole batch (its Triton
`lora_shrink` and `lora_expand`, the SGMV / BGMV pattern): shrink x[T, in] by every token's adapter A
[in, r] into an fp32 buffer [T, r], then expand by B [r, out] and add into the base layer's output. The
packed qkv and gate_up projections take one shrink and one expand each, so a decoder layer launches 8
kernels (qkv, o, gate_up, down). The slots are preallocated at `max_lora_rank`, so r is that rank.

Per layer and step: FLOPs 2 T r (in + out) over the wrapped linears (per GPU: column-parallel layers
shard out, row-parallel ones shard in); bytes: every distinct adapter's A and B read once, the input read
by the shrink, the output read and written by the expand's add, the fp32 buffer written and read. The time
is the project's roofline (`sim.cost.roofline.op_time_s`) at the profile's own GEMM compute ramp and
memory efficiency and its kernel launch time: an assumption that these small grouped GEMMs reach what
the profile's dense GEMMs reach (calibrated, each number's source in the profile); it is not yet checked
against published punica / S-LoRA kernel tables (docs/lora.md, next steps)."""

from __future__ import annotations

from sim.cost.roofline import gemm_compute_efficiency, op_time_s
from sim.inputs.lora import lora_linears

KERNELS_PER_LAYER = 8  # shrink + expand for qkv, o, gate_up, down
BUFFER_BYTES_PER_EL = 4  # the shrink's fp32 output


class LoraStepCost:
    """Prices the LoRA kernels of a step on one replica's cost model (a `sim.cost.CostModel`)."""

    def __init__(self, cost, rank: int, tp: int):
        model = cost.model
        self.cost, self.rank, self.n_layers = cost, rank, model.n_layers
        shards = [(n_in, n_out // tp) if column else (n_in // tp, n_out) for n_in, n_out, column in lora_linears(model)]
        self.in_out_per_layer = sum(n_in + n_out for n_in, n_out in shards)
        # the shrink reads each input once: q, k, v share theirs, as do gate and up (packed layers)
        self.in_per_layer = 2 * model.hidden_size + (model.n_heads * model.head_dim + model.intermediate_size) // tp
        self.out_per_layer = sum(n_out for _, n_out in shards)

    def step_s(self, n_tokens: int, n_adapters: int) -> float:
        """Seconds the LoRA kernels add to a step of `n_tokens` tokens naming `n_adapters` distinct
        adapters (0 when none: a batch of base-model requests only)."""
        if n_adapters <= 0 or n_tokens <= 0:
            return 0.0
        c, r = self.cost, self.rank
        flops = 2.0 * n_tokens * r * self.in_out_per_layer
        weights = n_adapters * r * self.in_out_per_layer * c.act_bytes_el  # lora_dtype auto: the model dtype
        activations = n_tokens * (self.in_per_layer + 2 * self.out_per_layer) * c.act_bytes_el
        buffer = 2 * n_tokens * r * BUFFER_BYTES_PER_EL * 4  # four linears' buffers, written and read
        e_compute = float(gemm_compute_efficiency(max(n_tokens, 1), c.eff))
        time, _, _ = op_time_s(flops, weights + activations + buffer, c.peak_flops, e_compute, c.bandwidth,
                               c.eff.memory, c.eff, n_kernels=KERNELS_PER_LAYER)
        return float(time) * self.n_layers
