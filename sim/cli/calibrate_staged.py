"""`infersim calibrate engine` on open-loop serving runs (`shared_prefix_stages` cases): fit the
async engine's non-overlapped residue and front end by re-simulation (sim/validate/fit_staged.py)."""

from __future__ import annotations

from pathlib import Path

from sim.cli.common import console, print_json, print_table


def calibrate_staged(cases: list, preset: str, out: Path, as_json: bool) -> None:
    """Fit, write the preset YAML at `out` (atomically), print the before/after mean |error|."""
    import yaml

    from sim.inputs.engines.overhead import EngineOverhead
    from sim.inputs.engines.preset import load_engine
    from sim.output import write_text
    from sim.validate.fit_staged import fit_staged
    from sim.validate.report import summary_rows
    from sim.validate.run import predict

    base = load_engine(preset)
    start = EngineOverhead.from_preset(base)
    fitted, error = fit_staged(cases, start, preset, progress=None if as_json else console.print)
    data = base.model_dump()
    data["name"] = out.stem
    data["overhead"].update(residue_us=round(fitted.residue_s * 1e6, 1),
                            frontend_ms=round(fitted.frontend_s * 1e3, 2))
    data["fitted_on"] = (f"infersim calibrate engine (sim/validate/fit_staged.py) on {len(cases)} shared_prefix_stages "
                         f"case(s); fit mean |error| {error:.1%}")
    write_text(out, "# Written by `infersim calibrate engine`.\n" + yaml.safe_dump(data, sort_keys=False))
    before = summary_rows([predict(c, preset) for c in cases])[-1]["median_abs_error"]
    after = summary_rows([predict(c, str(out)) for c in cases])[-1]["median_abs_error"]
    report = {"engine": base.name, "out": str(out), "n_cases_fitted": len(cases),
              "overhead": {key: data["overhead"][key] for key in ("residue_us", "frontend_ms")},
              "median_abs_error_before": before, "median_abs_error_after": after}
    if as_json:
        print_json(report)
        return
    print_table(f"calibrate engine {base.name} -> {out}", ["", ""], [
        ["cases fitted", str(len(cases))],
        ["residue (us) / front end (ms)", f"{report['overhead']['residue_us']} / {report['overhead']['frontend_ms']}"],
        ["median |error| before", f"{before:.1%}"], ["median |error| after", f"{after:.1%}"]])
