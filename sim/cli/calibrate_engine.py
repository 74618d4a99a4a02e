"""`infersim calibrate engine`: fit an engine preset's CPU overhead terms to measured results."""

from __future__ import annotations

from pathlib import Path

import typer

from sim.cli.common import console, print_json, print_table
from sim.validate.limits import DEFAULT_MAX_SIM_REQUESTS


def engine(
    measured: list[Path] = typer.Argument(..., help="validate-format CSVs and/or `vllm bench serve` result JSONs, "
                                          "or one per-request file (detailed bench JSON, AIPerf JSONL, OTLP spans)"),
    preset: str = typer.Option("vllm", "--engine", help="preset (name or YAML) whose overhead terms to fit"),
    out: Path = typer.Option(..., "--out", "-o", help="write the fitted engine YAML here"),
    split: str = typer.Option("all", "--split", help="all | fit: fit on every case, or only on split=fit rows"),
    model: str = typer.Option(None, "--model", "-m", help="bench JSON: the model served", show_default=False),
    hardware: str = typer.Option(None, "--hardware", "-H", help="bench JSON: the GPU", show_default=False),
    tp: int = typer.Option(None, "--tp", min=1, help="bench JSON: tensor-parallel size [1]", show_default=False),
    weight_dtype: str = typer.Option(None, "--weight-dtype", help="bench JSON: checkpoint dtype [bf16]",
                                     show_default=False),
    objective: str = typer.Option("mean", "--objective", help="mean | median |relative error| to minimise"),
    max_sim_requests: int = typer.Option(DEFAULT_MAX_SIM_REQUESTS, "--max-sim-requests", min=1),
    as_json: bool = typer.Option(False, "--json", help="print the before/after report as JSON"),
) -> None:
    """Fit per-step / per-sequence / per-token CPU costs; write a new engine YAML; report before/after error."""
    import yaml

    from sim.cli.outputs import claim
    from sim.errors import InputError
    from sim.inputs.engines.overhead import EngineOverhead
    from sim.inputs.engines.preset import load_engine
    from sim.output import staged_files
    from sim.run.destination import FileOut
    from sim.validate.bench_json import cases_from_bench_json
    from sim.validate.cases import load_cases
    from sim.validate.fit import fit_overhead, tap_case
    from sim.validate.report import summary_rows
    from sim.validate.run import predict

    if split not in ("all", "fit"):
        raise typer.BadParameter("must be all or fit", param_hint="--split")
    if out.suffix not in (".yaml", ".yml"):  # checked before any work: the result is read back as a preset
        raise InputError("--out", None, f"{out} must end in .yaml or .yml (an engine preset YAML)")
    claim(files=[FileOut("--out", out)])  # refused before any work (an input, a folder, a FIFO), locked
    from sim.cli.measured import calibrate_measured, split_measured

    per_request, others = split_measured(measured)
    if not per_request and not any(p.suffix == ".json" for p in measured):
        from sim.cli.validate import refuse_per_request_flags

        refuse_per_request_flags(model=model, hardware=hardware, tp=tp, weight_dtype=weight_dtype)
    tp, weight_dtype = tp or 1, weight_dtype or "bf16"
    if per_request:  # a run request by request: fit by re-simulation (docs/measurements.md)
        if len(per_request) > 1 or others:
            raise typer.BadParameter("give one per-request measurement file alone", param_hint="MEASURED")
        calibrate_measured(per_request[0], preset, out, model, hardware, tp, weight_dtype, as_json)
        return
    base = load_engine(preset)
    cases = []
    for path in measured:
        if path.suffix == ".json":
            cases += cases_from_bench_json(path, base.name if Path(preset).suffix == "" else preset, model, hardware,
                                           tp, weight_dtype)
        else:
            cases += load_cases([path])
    cases = [c for c in cases if split == "all" or c.split == "fit"]
    _check_case_engines(cases, base)
    staged = [c for c in cases
              if c.workload == "shared_prefix_stages" and c.workload_args.get("measured") != "overloaded"]
    if staged:  # open-loop serving runs: fitted by re-simulation
        from sim.cli.calibrate_staged import calibrate_staged

        return calibrate_staged(staged, preset, out, as_json)
    tapped, skipped = [], []
    for case in cases:
        result = tap_case(case, preset, max_sim_requests)
        (skipped.append((case.case_id, result)) if isinstance(result, str) else tapped.append(result))
    if not tapped:
        raise InputError(measured[0], None, "no case can be used for fitting: "
                                            + "; ".join(f"{cid}: {why}" for cid, why in skipped[:3]))
    start = EngineOverhead.from_preset(base)
    fitted = fit_overhead(tapped, start, objective)
    data = base.model_dump()
    data["name"] = out.stem
    data["overhead"].update(per_step_us=round(float(fitted.per_step_s) * 1e6, 1),
                            per_seq_us=round(float(fitted.per_seq_s) * 1e6, 2),
                            per_token_us=round(float(fitted.per_token_s) * 1e6, 3))
    sources = ", ".join(p.name for p in measured)
    data["fitted_on"] = f"infersim calibrate engine --objective {objective} on {len(tapped)} case(s) from {sources}"
    text = "# Written by `infersim calibrate engine`.\n" + yaml.safe_dump(data, sort_keys=False)
    used = [t.case for t in tapped]
    with staged_files() as stage:  # written, read back and scored; published only if all of that works
        staged = stage(out, lambda tmp: Path(tmp).write_text(text))
        before = summary_rows([predict(c, preset, max_sim_requests) for c in used])[-1]["median_abs_error"]
        after = summary_rows([predict(c, str(staged), max_sim_requests) for c in used])[-1]["median_abs_error"]
    report = {"engine": base.name, "out": str(out), "n_cases_fitted": len(tapped), "skipped": skipped,
              "overhead_us": {k: data["overhead"][k] for k in ("per_step_us", "per_seq_us", "per_token_us")},
              "median_abs_error_before": before, "median_abs_error_after": after}
    if as_json:
        print_json(report)
        return
    print_table(f"calibrate engine {base.name} -> {out}", ["", ""], [
        ["cases fitted", str(len(tapped))], ["skipped", str(len(skipped))],
        ["per step / seq / token (us)", " / ".join(str(v) for v in report["overhead_us"].values())],
        ["median |error| before", f"{before:.1%}"], ["median |error| after", f"{after:.1%}"]])
    for cid, why in skipped:
        console.print(f"skipped {cid}: {why}")


def _check_case_engines(cases: list, base) -> None:
    """Each case's `engine` names a known engine (validate's rule), of the fitted preset's family
    when both are bundled families: the fit re-prices the cases on `base`, so a row measured on
    another engine would be fitted as if `base` had run it."""
    from sim.errors import InputError
    from sim.inputs.engines.preset import engine_names, load_engine
    from sim.validate.names import engine_name

    families = {name.split("@")[0] for name in engine_names()}
    for case in cases:
        measured_on = load_engine(engine_name(case.case_id, case.engine)).family
        if measured_on in families and base.family in families and measured_on != base.family:
            raise InputError(case.case_id, "engine", f"measured on {case.engine}, but the fit is of --engine "
                                                     f"{base.name}'s terms: give --engine {measured_on} or leave "
                                                     "the row out")
