"""How a plan pays for its GPUs (issue 35 item 4): a stated choice, per profile.

- `gpu`: the GPUs the replicas use (a provider renting single GPUs); the default of a profile.
- `node`: whole nodes (`interconnect.max_gpus_per_node`: an HGX server, a GB200 compute tray), the
  replicas packed as `whole_nodes` packs them (none straddles two nodes needlessly).
- `rack`: whole scale-up domains (`interconnect.scale_up_domain_gpus`: a GB200 NVL72 rack), packed the
  same way; a profile without a domain larger than its node bills the same as `node`.

A profile names its own (`billing:` in its YAML, with its source there; gb200-nvl72: `rack`, as CoreWeave
deploys NVL72 only as full racks), `plan --billing UNIT` or `--billing PROFILE=UNIT` overrides it. The
plan ranks candidates by the billed cost and prints the choice with the recommendation.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.errors import InputError
from sim.inputs.hardware import HardwareProfile
from sim.planner.layouts import whole_nodes

BILLING_UNITS = ("gpu", "node", "rack")


@dataclass(frozen=True)
class Billing:
    unit: str  # one of BILLING_UNITS
    gpus_per_unit: int  # GPUs one billed unit holds (1 for gpu)
    source: str  # "profile" or "--billing"

    def billed_gpus(self, replicas: int, gpus_per_replica: int) -> int:
        """GPUs paid for: those used, or the whole units the replicas are packed on."""
        if self.unit == "gpu":
            return replicas * gpus_per_replica
        return whole_nodes(replicas, gpus_per_replica, self.gpus_per_unit) * self.gpus_per_unit

    def to_dict(self, replicas: int, gpus_per_replica: int) -> dict:
        billed = self.billed_gpus(replicas, gpus_per_replica)
        return {"unit": self.unit, "gpus_per_unit": self.gpus_per_unit, "from": self.source,
                "units": billed // self.gpus_per_unit, "billed_gpus": billed}


def billing_of(hw: HardwareProfile, unit: str | None = None) -> Billing:
    """The profile's billing, or `unit` (from --billing) instead."""
    chosen = unit or hw.billing
    per_unit = {"gpu": 1, "node": hw.interconnect.max_gpus_per_node, "rack": hw.scale_up_gpus}[chosen]
    return Billing(chosen, per_unit, "--billing" if unit else "profile")


def parse_billing(texts: list[str] | None, hardware: list[str]) -> dict[str, str]:
    """`["rack"]` (every profile) and/or `["gb200-nvl72=node"]` (that profile, over a bare UNIT) ->
    {profile: unit}; InputError for an unknown unit or profile, or one given twice."""
    every: str | None = None
    own: dict[str, str] = {}
    for text in texts or []:
        name, sep, unit = (part.strip() for part in text.rpartition("="))
        if unit not in BILLING_UNITS or (sep and name not in hardware):
            raise InputError("--billing", text, f"expected UNIT or PROFILE=UNIT, UNIT one of {', '.join(BILLING_UNITS)}"
                                                f" and PROFILE one of --hardware ({', '.join(hardware)})")
        if (name in own) if sep else (every is not None):
            raise InputError("--billing", text, "given twice")
        if sep:
            own[name] = unit
        else:
            every = unit
    return {name: own.get(name, every) for name in hardware if name in own or every is not None}
