"""A hardware profile's `power` section: what one GPU draws idle, at its board limit, and how its
draw rises with what a step keeps busy (sim/cost/energy.py, docs/power.md).

    P = idle_w + (tdp_w - idle_w) * (compute_weight * U_compute + memory_weight * U_memory), at most tdp_w

U_compute: the step's FLOPs over (peak FLOP/s x step time); U_memory: its HBM bytes over (peak
bandwidth x step time). Gaps between steps draw idle_w. Each figure's source goes in the profile's
`sources` (power.idle_w, power.tdp_w, power.weights)."""

from __future__ import annotations

from pydantic import ConfigDict, Field, model_validator

from sim.schema import StrictModel

MAX_BOARD_W = 5000.0  # above any accelerator board's limit (MI355X: 1400 W); a typo's scale is refused


class PowerModel(StrictModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    idle_w: float = Field(gt=0, le=MAX_BOARD_W)  # one GPU with a CUDA context and no kernel running
    tdp_w: float = Field(gt=0, le=MAX_BOARD_W)  # board power limit (datasheet TDP / TBP)
    compute_weight: float = Field(ge=0, le=4)  # share of (tdp - idle) a step at 100 % of peak FLOP/s adds
    memory_weight: float = Field(ge=0, le=4)  # share of (tdp - idle) a step at 100 % of peak HBM bandwidth adds

    @model_validator(mode="after")
    def _idle_below_limit(self) -> PowerModel:
        if self.idle_w >= self.tdp_w:
            raise ValueError(f"idle_w ({self.idle_w:g}) must be below tdp_w ({self.tdp_w:g})")
        return self

    def watts(self, u_compute: float, u_memory: float) -> float:
        """One GPU's draw during a step of these utilisations (each in [0, 1])."""
        rise = self.compute_weight * u_compute + self.memory_weight * u_memory
        return min(self.tdp_w, self.idle_w + (self.tdp_w - self.idle_w) * rise)
