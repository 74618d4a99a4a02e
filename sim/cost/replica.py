"""The cost model of one replica's layout: dense TP, pipeline stages, expert parallel, or both."""

from __future__ import annotations

from sim.cost.expert_parallel import ExpertParallelCostModel
from sim.cost.model import CostModel
from sim.cost.pipeline import PipelineCostModel
from sim.cost.pipeline_ep import PipelineExpertParallelCostModel
from sim.inputs.hardware import HardwareProfile
from sim.inputs.layout.parallel import ReplicaLayout
from sim.inputs.model import ModelSpec


def replica_cost_model(model: ModelSpec, hw: HardwareProfile, tp: int = 1, *args, pp: int = 1,
                       layout: ReplicaLayout | None = None, expert_parallel=None, **kwargs) -> CostModel:
    """The cost model of a replica of `pp` stages of `tp` GPUs: `CostModel` itself when pp is 1
    (the dense single-stage paths, unchanged), else `PipelineCostModel`; with `expert_parallel`
    (sim.cost.expert_parallel.ExpertParallelism of `layout`) one attention rank's
    `ExpertParallelCostModel`, staged as `PipelineExpertParallelCostModel` when pp > 1."""
    if expert_parallel is not None and pp > 1:  # stages of an EP / DP-attention layout (sim/cost/pipeline_ep.py)
        return PipelineExpertParallelCostModel(model, hw, layout, *args, pp=pp, expert_parallel=expert_parallel,
                                               **kwargs)
    if expert_parallel is not None:
        return ExpertParallelCostModel(model, hw, layout, *args, expert_parallel=expert_parallel, **kwargs)
    if pp == 1:
        return CostModel(model, hw, tp, *args, **kwargs)
    return PipelineCostModel(model, hw, tp, *args, pp=pp, **kwargs)
