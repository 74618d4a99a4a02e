"""Per-request measurements on the command line: `validate` and `calibrate engine` hand files
of a known per-request format (sim.validate.measured) here."""

from __future__ import annotations

from pathlib import Path

from sim.cli.common import console, print_json, print_table


def split_measured(paths: list[Path]) -> tuple[list[Path], list[Path]]:
    """(per-request measurement files, everything else), by content."""
    from sim.validate.measured import measured_format

    measured = [p for p in paths if measured_format(p) is not None]
    return measured, [p for p in paths if p not in measured]


def _setup(path: Path, engine: str, model: str | None, hardware: str | None, tp: int, weight_dtype: str):
    from sim.errors import InputError
    from sim.validate.measured import load_measured
    from sim.validate.measured.replay import run_config

    if not model or not hardware:
        raise InputError("--model/--hardware", None, "required with per-request measurements (the files do not "
                                                     "name the model spec or the GPU)")
    run = load_measured(path)
    return run, run_config(run, engine, model, hardware, tp, weight_dtype)


def _pct(value) -> str:
    return "-" if value is None else f"{value:+.1%}"


def print_residuals(title: str, report: dict) -> None:
    rows = []
    for metric in ("ttft", "itl", "e2e"):
        r = report[metric]
        rows.append([metric.upper(), r["n"], "-" if r["measured_mean_ms"] is None else f"{r['measured_mean_ms']:.4g}",
                     "-" if r["predicted_mean_ms"] is None else f"{r['predicted_mean_ms']:.4g}",
                     _pct(r["signed"]["median"]), _pct(r["signed"]["mean"]), _pct(r["signed"]["p90"]),
                     _pct(r["abs"]["median"]).lstrip("+"), _pct(r["abs"]["mean"]).lstrip("+"),
                     _pct(r["abs"]["p90"]).lstrip("+")])
    print_table(title, ["metric", "requests", "measured mean ms", "predicted mean ms", "median err", "mean err",
                        "p90 err", "median |err|", "mean |err|", "p90 |err|"], rows)
    if report["n_unfinished"]:
        console.print(f"{report['n_unfinished']} of {report['n_requests']} requests did not finish in the simulation")


def write_per_request(path: Path, run, predicted: dict) -> None:
    """One CSV row per measured request (file order): lengths, arrival, measured and predicted."""
    import math

    from sim.output import write_text

    def cell(value) -> str:
        value = float(value)
        return repr(value) if math.isfinite(value) else ""

    lines = ["index,arrival_s,prompt_tokens,output_tokens,ttft_s,itl_s,e2e_s,predicted_ttft_s,predicted_itl_s,"
             "predicted_e2e_s"]
    for i in range(len(run)):
        times = [run.ttft_s[i], run.itl_s[i], run.e2e_s[i], predicted["ttft_s"][i], predicted["itl_s"][i],
                 predicted["e2e_s"][i]]
        lines.append(",".join([str(i), cell(run.arrival_s[i]), str(int(run.prompt_tokens[i])),
                               str(int(run.output_tokens[i]))] + [cell(t) for t in times]))
    write_text(path, "\n".join(lines) + "\n")


def validate_measured(path: Path, engine: str, model, hardware, tp: int, weight_dtype: str,
                      per_request_out: Path | None, as_json: bool) -> None:
    """Replay the run as measured through `engine`'s preset and report per-request residuals."""
    from sim.errors import InputError
    from sim.validate.measured.replay import predict_requests, residual_report

    if not engine:
        raise InputError("--engine", None, "required with per-request measurements: the preset to replay them with")
    run, cfg = _setup(path, engine, model, hardware, tp, weight_dtype)
    predicted = predict_requests(cfg, run)
    report = {"source": str(path), "format": run.format, "engine": cfg.engine, "n_left_out": run.n_left_out,
              "residuals": residual_report(run, predicted)}
    if per_request_out is not None:
        write_per_request(per_request_out, run, predicted)
    if as_json:
        print_json(report)
        return
    print_residuals(f"{path.name} ({run.format}, {len(run)} requests, {run.n_left_out} left out) vs {cfg.engine}",
                    report["residuals"])


def calibrate_measured(path: Path, preset: str, out: Path, model, hardware, tp: int, weight_dtype: str,
                       as_json: bool) -> None:
    """Fit the preset's per-step / per-sequence terms to the run by re-simulation; write the YAML."""
    import yaml

    from sim.inputs.engines.overhead import EngineOverhead
    from sim.inputs.engines.preset import load_engine
    from sim.output import write_text
    from sim.validate.measured.refit import refit_overhead
    from sim.validate.measured.replay import predict_requests, residual_report

    run, cfg = _setup(path, preset, model, hardware, tp, weight_dtype)
    base = load_engine(cfg.engine)
    start = EngineOverhead.from_preset(base, cfg.num_scheduler_steps, cfg.enforce_eager)
    before = residual_report(run, predict_requests(cfg, run, start))
    fit = refit_overhead(cfg, run, start)
    after = residual_report(run, predict_requests(cfg, run, fit.overhead))
    data = base.model_dump()
    data["name"] = out.stem
    data["overhead"].update(per_step_us=round(fit.overhead.per_step_s * 1e6, 1),
                            per_seq_us=round(fit.overhead.per_seq_s * 1e6, 2))
    data["fitted_on"] = (f"infersim calibrate engine (re-simulation, sim.validate.measured.refit) on {len(run)} "
                         f"requests of {path.name} ({run.format}), {cfg.model} on {cfg.hardware} TP{cfg.tp}")
    write_text(out, "# Written by `infersim calibrate engine`.\n" + yaml.safe_dump(data, sort_keys=False))
    report = {"engine": base.name, "out": str(out), "source": str(path), "format": run.format,
              "n_requests": len(run), "n_left_out": run.n_left_out, "n_simulations": fit.n_simulations,
              "overhead_us": {k: data["overhead"][k] for k in ("per_step_us", "per_seq_us", "per_token_us")},
              "loss_before": fit.loss_before, "loss_after": fit.loss_after,
              "residuals_before": before, "residuals_after": after}
    if as_json:
        print_json(report)
        return
    print_table(f"calibrate engine {base.name} -> {out} (re-simulation fit)", ["", ""], [
        ["requests", str(len(run))], ["simulations", str(fit.n_simulations)],
        ["per step / seq / token (us)", " / ".join(str(v) for v in report["overhead_us"].values())],
        ["loss before -> after", f"{fit.loss_before:.4f} -> {fit.loss_after:.4f}"]])
    print_residuals("before (preset terms)", before)
    print_residuals("after (fitted terms)", after)
