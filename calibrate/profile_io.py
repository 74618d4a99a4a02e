"""Write a calibrated hardware profile: the base profile's datasheet numbers, the fitted
efficiency terms (and link latency), and a `calibration` section saying where they came from.

The `calibration` section (free-form for `sim.hardware`, whose field is `dict | None`):

    calibration:
      date: ISO time of the fit
      base_profile: name of the base profile
      measurements: [{path, sha256, n_rows, devices, sources}]
      fitted: {class: {n_rows, mape, terms: {key: value}}}
      kept_from_base: [terms no row measured]
      residuals: {mape, per_op: {op: {mape, n}}}   # the profile against its own measurements
"""

from __future__ import annotations

import datetime
import hashlib
import os
import tempfile
from pathlib import Path

import pandas as pd
import yaml

from calibrate.fit import FitResult
from sim.hardware import HardwareProfile
from sim.yamlio import validate


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def measurement_sources(files: list[tuple[Path, pd.DataFrame]]) -> list[dict]:
    """One provenance entry per measurements file: path, sha256, rows, devices, sources."""
    return [
        {
            "path": str(path),
            "sha256": _sha256(Path(path)),
            "n_rows": len(frame),
            "devices": sorted(frame["device"].astype(str).unique()),
            "sources": sorted(frame["source"].astype(str).unique()),
        }  # fmt: skip
        for path, frame in files
    ]


def _plain(value):
    """numpy scalars -> Python numbers (floats to 6 significant digits), so the YAML stays readable."""
    if isinstance(value, dict):
        return {(int(k) if hasattr(k, "item") else k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    value = value.item() if hasattr(value, "item") else value
    return float(f"{value:.6g}") if isinstance(value, float) else value


def calibrated_profile_data(
    fit: FitResult, base: HardwareProfile, name: str, sources: list[dict], residuals: dict
) -> dict:
    """The calibrated profile as a plain mapping (what is written to YAML)."""
    data = fit.hardware.model_dump(mode="python", exclude_none=True)
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    data["name"] = name
    data["description"] = f"{base.description or base.name} (calibrated {now[:10]})".strip()
    data["provenance"] = (
        f"Calibrated {now} from {', '.join(s['path'] for s in sources)} by infersim calibrate fit;\n"
        "fitted terms and residuals in the calibration section. Base profile provenance:\n" + base.provenance
    )
    data["calibration"] = _plain({
        "date": now,
        "base_profile": base.name,
        "measurements": sources,
        "fitted": {c.name: {"n_rows": c.n_rows, "mape": round(c.mape, 5), "terms": c.terms} for c in fit.classes},
        "kept_from_base": list(fit.kept),
        "residuals": residuals,
    })  # fmt: skip
    return _plain(data)


def write_profile(data: dict, path: str | os.PathLike) -> Path:
    """Validate as a `HardwareProfile`, then write YAML atomically (temp file, rename)."""
    target = Path(path)
    validate(HardwareProfile, data, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w") as tmp_file:
            yaml.safe_dump(data, tmp_file, sort_keys=False, width=110)
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return target
