"""Pipeline stages of an expert-parallel / data-parallel-attention replica (`--pp P` with `--ep` /
`--dp --enable-dp-attention`, TensorRT-LLM's `--pp P --tp T --ep T` with `enable_attention_dp`).

**Layout.** Each of the P stages is the EP / DP-attention layout of its own layers: its T GPUs
hold the stage's attention (per attention rank) and the stage's routed experts over the MoE
group; a replica is T x P GPUs (sim/inputs/layout/parallel.py). Memory already follows it
(sim/inputs/layout/layout_memory.py: the busiest stage's layers, experts over the MoE group, one
vocab table per stage).

**Step of one attention rank** = the pipeline formula of sim/cost/pipeline.py over the rank's
EP cost model (sim/cost/expert_parallel.py): the rank's sequences are dealt into m = min(P,
n_seqs) micro-batches, each priced by the EP cost of all layers (its MoE layers on every rank's
tokens, with dispatch and combine), the busiest stage does `stage_share` of each micro-batch's
layer time, and each micro-batch's activations cross the P-1 stage boundaries: one rank's
hidden states and residual, split over its attention TP GPUs. A hop leaves the scale-up domain
when the stage's T GPUs end one domain and the next stage's begin another.

**Ranks in lockstep** (sim/engine/lockstep.py) re-price a step's MoE part on every rank's tokens as
n_layers x (G(T_all) - G(d T_r)). Under P stages the busiest stage sees that change once per
micro-batch over its share of the layers, so `moe_group_layer_s(x)` here is P x stage_share x
G(x / P): the P micro-batches in flight when a rank holds at least P sequences (fewer
sequences, which leave stages idle, are priced as P micro-batches in this correction only).
Ranks with equal batches (every bundled validation row) get no correction either way.

Not modelled: TensorRT-LLM's MoE all-gather / reduce-scatter path without NVLink (priced as
the all-to-all, as without PP), micro-batches of unequal token counts across ranks.
"""

from __future__ import annotations

from sim.cost.expert_parallel import ExpertParallelCostModel
from sim.cost.pipeline import PipelineCostModel
from sim.cost.topology import stage_boundaries_cross
from sim.errors import InputError


class PipelineExpertParallelCostModel(PipelineCostModel, ExpertParallelCostModel):
    """One attention rank of an EP / DP-attention replica of `pp` stages (module docstring).
    Built as `PipelineExpertParallelCostModel(model, hw, layout, *args, pp=, expert_parallel=)`."""

    def __init__(self, model, hw, layout, *args, pp: int, expert_parallel, **kwargs):
        super().__init__(model, hw, layout, *args, pp=pp, expert_parallel=expert_parallel, **kwargs)
        stage_gpus, domain = layout.n_gpus_per_stage, hw.scale_up_gpus
        if stage_gpus < domain and domain % stage_gpus and stage_gpus * pp > domain:
            raise InputError("--tp", None, f"pipeline stages of {stage_gpus} GPUs do not tile {hw.name}'s "
                             f"{domain}-GPU domains: give a stage size that divides the domain")
        crosses = stage_boundaries_cross(hw, stage_gpus, pp)
        self.hop_links = [self._hop_link(c) for c in crosses]
        self.hop_kinds = ["network" if c else "nvlink" for c in crosses]

    def moe_group_layer_s(self, n_moe_tokens: int) -> float:
        """The busiest stage's MoE time per model layer when all ranks hold `n_moe_tokens`,
        over the pp micro-batches in flight (module docstring)."""
        per_micro_batch = int(round(n_moe_tokens / self.pp))
        return self.pp * self.stage_share * ExpertParallelCostModel.moe_group_layer_s(self, per_micro_batch)
