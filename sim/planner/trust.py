"""What a plan's numbers rest on: plan.json's `trust` section, printed with the plan.

- `extrapolating`: the same reasons `simulate` gives (sim.run.intervals.run_extrapolating) for the
  recommended replica: guessed profile numbers, GEMM shapes without measured tables, M outside them.
- `validation`: which bundled measured cases (sim/validate/cases) share the recommendation's
  hardware and model: how many, at which TP sizes, by which engines, and whether one matches its
  TP exactly. No matching case means the plan is a model answer nobody measured here.
"""

from __future__ import annotations

from sim.errors import InputError
from sim.inputs.config import EngineConfig


def trust_section(cfg: EngineConfig) -> dict:
    """plan.json `trust` for one replica of the recommendation."""
    from sim.run.intervals import run_extrapolating

    return {"extrapolating": run_extrapolating(cfg), "validation": validation_coverage(cfg)}


def validation_coverage(cfg: EngineConfig) -> dict:
    """The bundled measured cases on the same hardware and model as `cfg`, by TP and engine."""
    from sim.validate.cases import load_cases
    from sim.validate.names import engine_name, gpu_name, model_name

    same: list = []
    for case in load_cases():
        try:
            key = (gpu_name("case", case.gpu), model_name("case", case.model))
        except InputError:
            continue
        if key == (cfg.hardware, cfg.model):
            same.append(case)
    exact = [c for c in same if c.tp == cfg.tp and c.pp == cfg.pp]
    engines = sorted({_engine(engine_name, c.engine) for c in same})
    tps = sorted({c.tp for c in same})
    if not same:
        line = f"no measured case on {cfg.hardware} with {cfg.model}: this plan is the model's answer, unvalidated"
    else:
        at_tp = f"{len(exact)} at tp{cfg.tp}" if exact else f"none at tp{cfg.tp} (measured at tp {_join(tps)})"
        line = (f"{len(same)} measured cases on {cfg.hardware} with {cfg.model} ({at_tp}; engines {_join(engines)}); "
                f"`infersim validate` replays them")
    return {"n_cases": len(same), "n_cases_same_tp": len(exact), "tps": tps, "engines": engines,
            "case_ids": [c.case_id for c in same], "line": line}


def _engine(engine_name, text: str) -> str:
    try:
        return engine_name("case", text)
    except InputError:
        return text


def _join(items) -> str:
    return ", ".join(str(i) for i in items)
