"""`infersim calibrate ...`: time kernels, fit a profile, report its residuals.

The `calibrate` package is imported inside the commands (it sits above `sim`), and torch only
inside `run` (it comes with the `calibrate` extra; `fit` and `report` never need it).
Bad input raises `InputError`: one line on stderr, exit status 2.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from sim.cli.common import new_app, print_json, print_table
from sim.errors import InputError
from sim.inputs.hardware import HardwareProfile, anchor_table_files, load_hardware
from sim.yamlio import read_mapping, validate

calibrate_app = new_app(
    help="Calibrate the cost model: time kernels, fit a profile, report residuals.",
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]
OutOpt = Annotated[Path, typer.Option("--out", help="Calibrated profile YAML to write.")]
MeasurementsArg = Annotated[
    list[Path], typer.Argument(help="Measurement CSVs: ours, or Vidur mlp.csv / all_reduce.csv.")
]


def _load_profile(name_or_path: str) -> HardwareProfile:
    """A profile YAML read fresh from disk (no cache: it may have just been rewritten), or a bundled name."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") and path.exists():  # a FIFO, device or folder: read_mapping refuses it
        return validate(HardwareProfile, anchor_table_files(read_mapping(path), path.parent), path)
    return load_hardware(name_or_path)


def measurements_path(out: Path) -> Path:
    """Where `calibrate run --out X.yaml` keeps its timings: X.measurements.csv beside it."""
    return out.with_name(f"{out.stem}.measurements.csv")


def _check_out(out: Path, with_measurements: bool = False) -> None:
    """A profile YAML (with its measurements CSV beside it): claimed before any work."""
    from sim.cli.outputs import claim
    from sim.run.destination import FileOut

    if out.suffix not in (".yaml", ".yml"):
        raise InputError("--out", str(out), "a path ending in .yaml or .yml")
    also = [FileOut("--out", measurements_path(out))] if with_measurements else []
    claim(files=[FileOut("--out", out), *also])


NoTablesOpt = Annotated[
    bool, typer.Option("--no-tables", help="Smooth model only: do not store the measured GEMM tables.")
]


def _fit_and_write(files: list[tuple[Path, object]], base_name: str, out: Path, as_json: bool,
                   tables: bool = True) -> None:
    """Fit on the measurement frames of `files`, write the profile to `out`, print a summary."""
    import pandas as pd

    from calibrate.fit import fit_profile
    from calibrate.measurements import validate_measurements
    from calibrate.profile_io import calibrated_profile_data, measurement_sources, write_profile
    from calibrate.report import mape_summary, residual_rows

    base = _load_profile(base_name)
    frame = _predicted_rows(validate_measurements(pd.concat([f for _, f in files], ignore_index=True), "measurements"))
    fit = fit_profile(frame, base, tables=tables)
    residuals = mape_summary(residual_rows(frame, fit.hardware))
    data = calibrated_profile_data(fit, base, out.stem, measurement_sources(files), residuals, frame)
    write_profile(data, out)
    if as_json:
        print_json(
            {
                "profile": str(out),
                "fitted": data["calibration"]["fitted"],
                "kept_from_base": fit.kept,
                "kernel_fits": data["calibration"].get("kernel_fits", {}),
                "residuals": residuals,
                "n_tables": len(fit.tables),
                "table_holdout": data["calibration"]["table_holdout"],
                "uncertainty": data.get("uncertainty"),
            }
        )
        return
    rows = [
        [c.name, str(c.n_rows), f"{100 * c.mape:.1f}", ", ".join(f"{k}={_fmt(v)}" for k, v in c.terms.items())]
        for c in fit.classes
    ]
    print_table(f"Fitted {out}", ["class", "rows", "MAPE %", "terms"], rows)
    typer.echo(f"kept from {base.name}: {', '.join(fit.kept)}")
    for op, kernel_fit in fit.kernel_fits.items():
        typer.echo(f"{op}: {kernel_fit['n_rows']} rows timed {kernel_fit['kernel']}: not fitted into the profile "
                   f"(its own fit, MAPE {100 * kernel_fit['mape']:.1f} %, is in calibration.kernel_fits)")
    typer.echo(f"measured GEMM tables: {len(fit.tables)} shapes" + ("" if tables else " (--no-tables)"))


def _predicted_rows(frame):
    """The rows the cost model predicts; ops it does not yet (grouped experts, MLA decode) are left
    out of fits and reports, said in one line on stderr."""
    from calibrate.measurements import split_predicted

    kept, left_out = split_predicted(frame)
    if left_out:
        counts = ", ".join(f"{n} {op}" for op, n in left_out.items())
        typer.echo(f"left out of the fit and residuals (timed and kept in the CSV; the cost model has no "
                   f"term for them yet): {counts}", err=True)
    if kept.empty:
        raise InputError("measurements", "op", "at least one row of an op the cost model predicts")
    return kept


def _fmt(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _read_files(paths: list[Path]) -> list[tuple[Path, object]]:
    from calibrate.vidur_import import read_measurement_file

    if not paths:
        raise InputError("MEASUREMENTS", None, "at least one measurements file")
    return [(path, read_measurement_file(path)) for path in paths]


@calibrate_app.command("run")

def run_command(
    out: OutOpt,
    device: Annotated[str, typer.Option("--device", help="cpu or cuda.")] = "cuda",
    quick: Annotated[bool, typer.Option("--quick", help="A few points per axis (CPU: a toy model).")] = False,
    base: Annotated[str, typer.Option("--base", help="Base profile: bundled name or YAML.")] = "h200",
    model: Annotated[list[str] | None, typer.Option("--model", help="Model spec(s) to time.")] = None,
    dtype: Annotated[str, typer.Option("--dtype", help="bf16, fp16, fp32 or fp8 (GEMMs only).")] = "bf16",
    time_budget_s: Annotated[
        float | None, typer.Option("--time-budget-s", help="Stop starting new points after this.")
    ] = None,
    no_tables: NoTablesOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Time kernels on this machine, write OUT's measurements CSV next to it, fit, write OUT."""
    _check_out(out, with_measurements=True)
    if time_budget_s is not None and not (math.isfinite(time_budget_s) and time_budget_s > 0):
        raise InputError("--time-budget-s", None, f"must be a finite number of seconds > 0; got {time_budget_s}")
    _load_profile(base)  # a bad --base fails before minutes of timing
    try:
        from calibrate.runner import run_calibration, write_measurements
    except ModuleNotFoundError as error:
        raise InputError("calibrate run", error.name, "installed: pip install 'infersim[calibrate]'") from None
    from calibrate.shape_summary import timed_shape_lines
    from sim.cli.common import StageProgress
    from sim.inputs.model import load_model

    specs = [load_model(name) for name in (model or ["llama-3-8b"])]
    notes: list[str] = []
    with StageProgress(enabled=not as_json, command="calibrate run") as progress:
        frame = run_calibration(device, specs, quick, dtype, time_budget_s=time_budget_s, progress=progress,
                                notes=notes)
    csv_path = write_measurements(frame, measurements_path(out))
    typer.echo(f"wrote {csv_path} ({len(frame)} measurements); shapes timed:", err=True)
    for line in timed_shape_lines(frame) + notes:
        typer.echo(f"  {line}", err=True)
    _fit_and_write([(csv_path, frame)], base, out, as_json, tables=not no_tables)


@calibrate_app.command("fit")

def fit_command(
    measurements: MeasurementsArg,
    out: OutOpt,
    base: Annotated[str, typer.Option("--base", help="Base profile: bundled name or YAML.")] = "h100-sxm",
    no_tables: NoTablesOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Fit the cost model's terms to MEASUREMENTS and write a calibrated profile to OUT
    (with measured GEMM tables unless --no-tables)."""
    _check_out(out)
    _fit_and_write(_read_files(measurements), base, out, as_json, tables=not no_tables)


@calibrate_app.command("report")

def report_command(
    profile: Annotated[str, typer.Argument(help="Profile: bundled name or YAML path.")],
    measurements: MeasurementsArg,
    as_json: JsonOpt = False,
    plot: Annotated[Path | None, typer.Option("--plot", help="Write a predicted-vs-measured PNG.")] = None,
) -> None:
    """Per-op MAPE of PROFILE's predictions against MEASUREMENTS (MAPE as a fraction in JSON)."""
    import pandas as pd

    from calibrate.measurements import validate_measurements
    from calibrate.report import mape_summary, plot_predicted_vs_measured, residual_rows, summary_table_rows

    if plot is not None and plot.suffix.lower() != ".png":
        raise InputError("--plot", str(plot), "a path ending in .png")
    if plot is not None:
        from sim.cli.outputs import claim
        from sim.run.destination import FileOut

        claim(files=[FileOut("--plot", plot)])
    hw = _load_profile(profile)
    files = _read_files(measurements)
    frame = _predicted_rows(validate_measurements(pd.concat([f for _, f in files], ignore_index=True), "measurements"))
    rows = residual_rows(frame, hw)
    summary = mape_summary(rows)
    if plot is not None:
        plot_predicted_vs_measured(rows, plot, f"{hw.name}: predicted vs measured")
    if as_json:
        print_json(summary)
    else:
        print_table(f"{hw.name} vs {len(frame)} measurements", ["op", "n", "MAPE %", "bias %", "answered by"],
                    summary_table_rows(summary))


@calibrate_app.command("import-tables")

def import_tables_command(
    source: Annotated[Path, typer.Option("--source", help="AIConfigurator's systems/data folder, or one "
                                         "gemm_perf .parquet / .csv file.")],
    out: Annotated[Path, typer.Option("--out", help="The .npz grid to write (a profile names it in "
                                      "calibration.tables.gemm_grid.file).")],
    gpu: Annotated[str, typer.Option("--gpu", help="Profile name (h200) or AIConfigurator's GPU folder "
                                     "(h200_sxm); with a systems/data folder.")] = "",
    engine: Annotated[str, typer.Option("--engine", help="vllm, sglang or trtllm; with a folder.")] = "",
    version: Annotated[str, typer.Option("--version", help="Engine version folder, e.g. 0.24.0.")] = "",
    commit: Annotated[str, typer.Option("--commit", help="Source commit, recorded in the grid.")] = "",
    as_json: JsonOpt = False,
) -> None:
    """Convert an AIConfigurator GEMM table (latency ms per dtype, m, n, k) into a measured GEMM grid."""
    from calibrate.import_aic import AIC_LICENSE, AIC_REPO, gemm_table_path, grid_summary, import_gemm_table
    from sim.cli.outputs import claim
    from sim.run.destination import FileOut

    if out.suffix != ".npz" or out.is_dir():
        raise InputError("--out", str(out), "a file path ending in .npz")
    claim(files=[FileOut("--out", out)])
    if source.is_dir():
        for flag, value in (("--gpu", gpu), ("--engine", engine), ("--version", version)):
            if not value:
                raise InputError(flag, None, "required when --source is a systems/data folder")
        table = gemm_table_path(source, gpu, engine, version)
    else:
        table = source
    meta = {"source": AIC_REPO, "license": AIC_LICENSE, "commit": commit, "path": str(table),
            "engine": engine, "engine_version": version, "gpu": gpu}  # fmt: skip
    grid = import_gemm_table(table, meta)
    size = grid.write_npz(out)
    if as_json:
        print_json({"out": str(out), "bytes": size, "dtypes": sorted(grid.time_us), "skipped": grid.skipped_dtypes})
        return
    print_table(f"{out} ({size / 1e6:.2f} MB) from {table}", ["dtype", "measured", "missing", "grid"],
                grid_summary(grid))
    if grid.skipped_dtypes:
        typer.echo("left out (no weight dtype of ours): " + ", ".join(
            f"{k} ({v} rows)" for k, v in sorted(grid.skipped_dtypes.items())), err=True)
