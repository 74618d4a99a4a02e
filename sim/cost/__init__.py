"""Roofline cost model of one inference step (see DESIGN.md, "The cost model")."""

from sim.cost.model import CostModel
from sim.cost.step_cost import OpCost, StepCost

__all__ = ["CostModel", "OpCost", "StepCost"]
