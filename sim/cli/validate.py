"""`infersim validate`: replay measured end-to-end results through the simulator, print the errors."""

from __future__ import annotations

from pathlib import Path

import typer

from sim.cli.common import ProgressLines, print_json, print_table
from sim.validate.limits import DEFAULT_MAX_SIM_REQUESTS


def _pct(value) -> str:
    return "-" if value is None else f"{value:+.1%}" if value < 0 or value > 0 else "0.0%"


def _abs_pct(value) -> str:
    return "-" if value is None else f"{value:.1%}"


def refuse_per_request_flags(**given) -> None:
    """The per-request file's flags are read only with one: given without it, they are refused."""
    named = [f"--{name.replace('_', '-')}" for name, value in given.items() if value is not None]
    if named:
        from sim.errors import InputError

        raise InputError(named[0], None, "describes a bench JSON or per-request measurement file (vllm bench "
                                         "JSON, AIPerf JSONL, OTLP spans); the validation CSVs name their own "
                                         "model, GPU, tp and dtype per row: drop it")


def validate(
    cases: list[Path] = typer.Argument(None, help="validation CSVs (default: the bundled cases)", show_default=False),
    engine: str = typer.Option(None, "--engine", help="use this preset (name or YAML) for every case instead of "
                                                       "each case's own engine", show_default=False),
    split: str = typer.Option("all", "--split", help="all | fit | score: which cases to run"),
    max_sim_requests: int = typer.Option(DEFAULT_MAX_SIM_REQUESTS, "--max-sim-requests", min=1,
                                         help="simulate at most this many requests of a throughput case"),
    as_json: bool = typer.Option(False, "--json", help="print the report as JSON"),
    model: str = typer.Option(None, "--model", "-m", help="per-request file: the model served", show_default=False),
    hardware: str = typer.Option(None, "--hardware", "-H", help="per-request file: the GPU", show_default=False),
    tp: int = typer.Option(None, "--tp", min=1, help="per-request file: tensor-parallel size [1]", show_default=False),
    weight_dtype: str = typer.Option(None, "--weight-dtype", help="per-request file: checkpoint dtype [bf16]",
                                     show_default=False),
    per_request_out: Path = typer.Option(None, "--per-request-out", help="per-request file: write measured vs "
                                         "predicted per request to this CSV", show_default=False),
    hardware_profile: Path = typer.Option(None, "--hardware-profile", help="a (calibrated) profile YAML: run the "
                                          "cases on its base GPU with the bundled profile and with this one, errors "
                                          "side by side", show_default=False),
) -> None:
    """Measured vs predicted for each case, error per point, median |error| per source (fit/score halves).
    A per-request file (vllm bench --save-detailed JSON, AIPerf JSONL, OTLP spans) is replayed as
    measured instead: TTFT / ITL / E2E residuals per request (docs/measurements.md)."""
    from sim.cli.measured import split_measured, validate_measured
    from sim.cli.outputs import claim
    from sim.run.destination import FileOut

    claim(files=[FileOut("--per-request-out", per_request_out)])  # refused before any work, locked
    measured, others = split_measured(cases or [])
    if measured:
        if len(measured) > 1 or others:
            raise typer.BadParameter("give one per-request measurement file alone", param_hint="CASES")
        validate_measured(measured[0], engine, model, hardware, tp or 1, weight_dtype or "bf16", per_request_out,
                          as_json)
        return
    refuse_per_request_flags(model=model, hardware=hardware, tp=tp, weight_dtype=weight_dtype,
                              per_request_out=per_request_out)
    from sim.validate.cases import load_cases
    from sim.validate.report import report_dict
    from sim.validate.run import predict

    if split not in ("all", "fit", "score"):
        raise typer.BadParameter("must be all, fit or score", param_hint="--split")
    chosen = [c for c in load_cases(cases or None) if split == "all" or c.split == split]
    if not chosen:
        from sim.errors import InputError

        raise InputError("--split", split, "no case has this split (a row's `split` column: fit or score); "
                                           "nothing to validate")
    if hardware_profile is not None:
        _compare_profiles(chosen, hardware_profile, engine, max_sim_requests, as_json)
        return
    progress = ProgressLines("validate", enabled=not as_json)
    preds = []
    for case in chosen:
        preds.append(predict(case, engine, max_sim_requests))
        progress("cases", len(preds), len(chosen))
    report = report_dict(preds)
    if as_json:
        print_json(report)
        return
    rows = [[r["case_id"], r["engine"], r["metric"], f"{r['measured']:.5g}",
             "-" if r["predicted"] is None else f"{r['predicted']:.5g}",
             _pct(r["error"]) if r["predicted"] is not None else r["status"], r["split"]] for r in report["cases"]]
    print_table("cases", ["case", "engine", "metric", "measured", "predicted", "error", "split"], rows)
    rows = [[r["source"][:70], r["n_cases"], r["n_cannot_express"], _abs_pct(r["median_abs_error"]),
             _abs_pct(r["median_abs_error_fit"]), _abs_pct(r["median_abs_error_score"])] for r in report["by_source"]]
    print_table("median |error| per source", ["source", "cases", "cannot express", "all", "fit half", "score half"],
                rows)


def _compare_profiles(chosen, profile: Path, engine, max_sim_requests: int, as_json: bool) -> None:
    """`--hardware-profile`: datasheet vs calibrated error on every chosen case of the profile's GPU."""
    from sim.validate.compare import compare

    if profile.suffix not in (".yaml", ".yml") or not profile.exists():  # a FIFO, device, folder: read_mapping
        from sim.errors import InputError

        raise InputError("--hardware-profile", str(profile), "an existing profile YAML file (.yaml or .yml)")
    report = compare(chosen, str(profile), engine, max_sim_requests, ProgressLines("validate", enabled=not as_json))
    if as_json:
        print_json(report)
        return

    def shown(value) -> str:
        return "-" if value is None else f"{value:.5g}"

    rows = [[r["case_id"], r["metric"], f"{r['measured']:.5g}", shown(r["datasheet"]), _pct(r["datasheet_error"]),
             shown(r["calibrated"]), _pct(r["calibrated_error"]), r["split"]] for r in report["cases"]]
    print_table(f"{report['base']} (datasheet) vs {profile}", ["case", "metric", "measured", "datasheet", "error",
                                                              "calibrated", "error", "split"], rows)
    med = report["median_abs_error"]
    rows = [[kind, _abs_pct(med[kind]["all"]), _abs_pct(med[kind]["fit"]), _abs_pct(med[kind]["score"])]
            for kind in ("datasheet", "calibrated")]
    print_table("median |error|", ["profile", "all", "fit half", "score half"], rows)
    for r in report["cases"]:
        if r["status"] != "ok":
            typer.echo(f"{r['case_id']}: {r['status']}", err=True)
