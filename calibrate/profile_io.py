"""Write a calibrated hardware profile: the base profile's datasheet numbers, the fitted
efficiency terms (and link latency), and a `calibration` section saying where they came from.

The `calibration` section (free-form for `sim.inputs.hardware`, whose field is `dict | None`):

    calibration:
      date: ISO time of the fit
      base_profile: name of the base profile
      measurements: [{path, sha256, n_rows, devices, sources}]
      fitted: {class: {n_rows, mape, terms: {key: value}}}
      kept_from_base: [terms no row measured]
      residuals: {mape, bias, per_op: {op: {mape, bias, n}}}   # the profile against its own measurements
      table_holdout: {op: {mape, n}}   # leave every other M out of each table, predict it from the rest
      collective_residuals: {op.tpN: {mape, bias, n}}
      tables: {gemm: [...]}            # measured GEMM tables (sim/cost/tables.py), unless --no-tables
      timing_floor_us: {op: us}        # the host floor of host-bound timings (calibrate/timing_harness.py);
                                       # calibrate report uses it, the simulator does not
      kernel_fits: {op: {kernel, used_by_simulator: false, n_rows, mape, terms}}   # a timed kernel the
                                       # engines do not run (decode attention): fitted, kept apart, not simulated

and, at the top level, `uncertainty` (sigma per op class from these residuals,
calibrate/uncertainty.py) and `sources` (which numbers were fitted here, which kept from the base).
"""

from __future__ import annotations

import datetime
import hashlib
import os
from pathlib import Path

import pandas as pd
import yaml

from calibrate.fit import FitResult
from calibrate.fit_tables import holdout_relative_errors
from calibrate.measurements import ATTENTION_OPS, COLLECTIVE_OPS, GEMM_OPS
from calibrate.predict import predict_times_s
from calibrate.shape_summary import kernel_classes
from calibrate.uncertainty import uncertainty_from_residuals
from sim.inputs.hardware import HardwareProfile
from sim.output import staging_file, with_normal_mode
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


def class_relative_errors(frame: pd.DataFrame, fit: FitResult) -> dict[str, list]:
    """Relative errors per uncertainty class: the smooth fit on its own rows (GEMM, attention,
    collectives) and the tables' leave-every-other-M-out errors."""
    smooth = fit.hardware.model_copy(update={"calibration": None})
    out: dict[str, list] = {}
    for name, ops in (("gemm", GEMM_OPS), ("attention", ATTENTION_OPS), ("collective", COLLECTIVE_OPS)):
        rows = frame[frame["op"].isin(ops)].reset_index(drop=True)
        if not rows.empty:
            out[name] = list(predict_times_s(rows, smooth) / rows["time_s"].astype("float64").to_numpy() - 1.0)
    held = [e for errors in holdout_relative_errors(fit.tables).values() for e in errors]
    if held:
        out["gemm_table"] = held
    return out


def _sources(fit: FitResult, base: HardwareProfile) -> dict[str, str]:
    base_sources = dict(base.sources or {})
    out = {key: f"kept from {base.name}: {base_sources.get(key, 'see its provenance')}" for key in fit.kept}
    for c in fit.classes:
        out[c.name] = f"measured-fit ({c.n_rows} rows)"
    if fit.tables:
        out["gemm_tables"] = f"measured ({len(fit.tables)} shapes)"
    if fit.attention_tables:
        out["attention_tables"] = f"measured ({len(fit.attention_tables)} head shapes / block sizes)"
    for op, kernel_fit in fit.kernel_fits.items():
        out[op] = (f"kept from {base.name}: the {kernel_fit['n_rows']} {op} rows timed {kernel_fit['kernel']}; its "
                   "fit is in calibration.kernel_fits, not simulated")
    return out


def calibrated_profile_data(
    fit: FitResult, base: HardwareProfile, name: str, sources: list[dict], residuals: dict,
    frame: pd.DataFrame | None = None,
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
        "table_holdout": {
            op: {"mape": float(sum(abs(e) for e in errors) / len(errors)), "n": len(errors)}
            for op, errors in holdout_relative_errors(fit.tables).items()
        },
        "collective_residuals": fit.collective_residuals,
    })  # fmt: skip
    if fit.tables or fit.attention_tables:
        data["calibration"]["tables"] = (fit.hardware.calibration or {}).get("tables", {})
    floors = (fit.hardware.calibration or {}).get("timing_floor_us")
    if floors:
        data["calibration"]["timing_floor_us"] = _plain(floors)
    if fit.kernel_fits:
        data["calibration"]["kernel_fits"] = _plain(fit.kernel_fits)
    if frame is not None:
        data["uncertainty"] = uncertainty_from_residuals(class_relative_errors(frame, fit), base.uncertainty)
        data["calibration"]["kernels"] = kernel_classes(frame)  # which kernel class each term came from
    data["sources"] = _sources(fit, base)
    return _plain(data)


def write_profile(data: dict, path: str | os.PathLike) -> Path:
    """Validate as a `HardwareProfile`, then write YAML atomically (temp file, rename)."""
    target = Path(path)
    validate(HardwareProfile, data, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp_name = staging_file(target)  # `.NAME.partial-PID-*`: a killed run's is removed by the next
    try:
        with open(tmp_name, "w") as tmp_file:
            yaml.safe_dump(data, tmp_file, sort_keys=False, width=110)
        with_normal_mode(tmp_name)  # not mkstemp's 0600
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return target
