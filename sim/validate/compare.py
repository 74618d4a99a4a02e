"""Datasheet vs calibrated: every validation case of one GPU, predicted with its bundled profile and
with a user's (calibrated) profile of that GPU, errors side by side (`infersim validate
--hardware-profile FILE`).

The GPU is the profile's base (`calibration.base_profile`, written by `infersim calibrate fit`), or
the profile's own name when it has none; the cases are those whose `gpu` is that bundled profile.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sim.errors import InputError
from sim.inputs.hardware import bundled_profiles, load_hardware
from sim.validate.cases import Case
from sim.validate.names import gpu_name
from sim.validate.run import Prediction, predict


def base_profile_of(path: str) -> str:
    """The bundled profile a profile YAML calibrates; InputError when it names none that is bundled."""
    hw = load_hardware(str(path))
    base = str((hw.calibration or {}).get("base_profile") or hw.name)
    if base not in bundled_profiles():
        allowed = (f"a profile whose calibration.base_profile (or name) is a bundled profile "
                   f"({', '.join(bundled_profiles())}); got {base!r}")
        raise InputError("--hardware-profile", str(path), allowed)
    return base


def compare(cases: list[Case], profile_path: str, engine: str | None, max_sim_requests: int,
            progress=None) -> dict:
    """{"profile", "base", "cases": [{case_id, ..., datasheet, datasheet_error, calibrated,
    calibrated_error}], "median_abs_error": {datasheet|calibrated: {all, fit, score}}} over the cases
    on the profile's base GPU. InputError when no case runs on that GPU. `progress(stage, done, total)`
    after each case (both replays)."""
    base = base_profile_of(profile_path)
    chosen = [c for c in cases if gpu_name(c.case_id, c.gpu) == base]
    if not chosen:
        raise InputError("--hardware-profile", str(profile_path), f"cases on {base} (none among the chosen cases)")
    path = str(Path(profile_path))
    pairs = []
    for case in chosen:
        pairs.append((predict(case, engine, max_sim_requests), predict(case, engine, max_sim_requests, hardware=path)))
        if progress is not None:
            progress(f"cases on {base}, datasheet and calibrated", len(pairs), len(chosen))
    rows = [_row(datasheet, calibrated) for datasheet, calibrated in pairs]
    medians = {kind: {split: _median([r[f"{kind}_error"] for r in rows if split == "all" or r["split"] == split])
                      for split in ("all", "fit", "score")} for kind in ("datasheet", "calibrated")}  # fmt: skip
    return {"profile": path, "base": base, "cases": rows, "median_abs_error": medians}


def _row(datasheet: Prediction, calibrated: Prediction) -> dict:
    case = datasheet.case
    return {
        "case_id": case.case_id, "engine": datasheet.engine, "metric": case.metric, "measured": case.value,
        "split": case.split, "datasheet": datasheet.predicted, "datasheet_error": datasheet.error,
        "calibrated": calibrated.predicted, "calibrated_error": calibrated.error,
        "status": _status(datasheet, calibrated),
    }  # fmt: skip


def _status(datasheet: Prediction, calibrated: Prediction) -> str:
    why = [f"{kind}: cannot express: {p.reason}" for kind, p in (("datasheet", datasheet), ("calibrated", calibrated))
           if p.predicted is None]  # fmt: skip
    return "; ".join(why) or "ok"


def _median(errors: list) -> float | None:
    values = [abs(e) for e in errors if e is not None]
    return float(np.median(values)) if values else None
