"""`infersim validate` and `infersim calibrate engine`: the case format, cannot-express reporting,
bad input (one line, exit 2), and a fit that recovers known overhead terms."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.inputs.engines import EngineOverhead, load_engine
from sim.validate.cases import bundled_case_files, load_cases
from sim.validate.fit import fit_overhead, tap_case
from sim.validate.run import predict

ROW = dict(case_id="c1", source="hand-made", engine="vllm@0.6", model="llama-3.1-8b", gpu="H100", tp=1,
           weight_dtype="bf16", workload="fixed_batch", num_requests=8, input_len=32, output_len=128,
           metric="mean_e2e_latency_ms", value=900.0, split="score")


def write_cases(tmp_path, rows, name="cases.csv"):
    path = tmp_path / name
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def invoke(*args):
    return CliRunner().invoke(app, list(args))


def test_bundled_cases_load_cite_sources_and_fit_on_at_most_half():
    cases = load_cases()
    assert len(bundled_case_files()) >= 4 and len(cases) >= 100
    for path in bundled_case_files():
        group = [c for c in cases if c.file == str(path)]
        assert all(c.source and c.split in ("fit", "score") for c in group)
        assert sum(c.split == "fit" for c in group) <= len(group) / 2, path.name


def test_a_case_runs_and_reports_its_error(tmp_path):
    result = invoke("validate", str(write_cases(tmp_path, [ROW])), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    row = report["cases"][0]
    assert row["status"] == "ok" and row["predicted"] > 0
    assert row["error"] == pytest.approx((row["predicted"] - 900.0) / 900.0)
    assert report["by_source"][-1]["median_abs_error"] == pytest.approx(abs(row["error"]))


def test_cases_the_simulator_cannot_express_are_reported_not_skipped(tmp_path):
    rows = [ROW, {**ROW, "case_id": "too-big", "model": "llama-3.1-405b"},
            {**ROW, "case_id": "fp4-on-h100", "weight_dtype": "fp4"},
            {**ROW, "case_id": "sharegpt", "workload": "sharegpt", "input_len": "", "output_len": "",
             "model": "llama-2-7b", "metric": "request_throughput_req_s", "value": 10.0}]
    result = invoke("validate", str(write_cases(tmp_path, rows)), "--json")
    assert result.exit_code == 0, result.output
    status = {r["case_id"]: r["status"] for r in json.loads(result.stdout)["cases"]}
    assert status["c1"] == "ok"
    assert status["too-big"].startswith("cannot express:") and "does not fit" in status["too-big"]
    assert status["fp4-on-h100"].startswith("cannot express:") and "fp4" in status["fp4-on-h100"]
    assert status["sharegpt"].startswith("cannot express:") and "ShareGPT" in status["sharegpt"]
    table = invoke("validate", str(tmp_path / "cases.csv"))
    assert "cannot express" in table.stdout


@pytest.mark.parametrize(("change", "message"), [
    ({"drop": "metric"}, "missing column(s) metric"),
    ({"model": "gpt-5"}, "no model spec for 'gpt-5'"),
    ({"gpu": "TPUv5"}, "unknown GPU 'TPUv5'"),
    ({"engine": "ollama"}, "unknown engine 'ollama'"),
    ({"workload": "poisson"}, "workload: must be one of"),
    ({"value": -3}, "value: must be a finite number > 0"),
    ({"tp": 0}, "tp: must be a whole number in [1, 1,024]"),
])
def test_bad_case_files_are_one_line_and_exit_2(tmp_path, change, message):
    row = dict(ROW)
    if "drop" in change:
        row.pop(change["drop"])
    else:
        row.update(change)
    result = invoke("validate", str(write_cases(tmp_path, [row])))
    assert result.exit_code == 2
    assert message in result.output and len(result.output.strip().splitlines()) == 1


def test_unknown_engine_flag_is_one_line_exit_2(tmp_path):
    result = invoke("validate", str(write_cases(tmp_path, [ROW])), "--engine", "vlm")
    assert result.exit_code == 2 and "unknown engine 'vlm'" in result.output


def _measured_with(tmp_path, per_step_us, per_seq_us):
    """Cases whose 'measured' values are the simulator's own predictions under known overheads."""
    data = load_engine("vllm@0.6").model_dump()
    data["overhead"].update(per_step_us=per_step_us, per_seq_us=per_seq_us)
    truth = tmp_path / "truth.yaml"
    truth.write_text(json.dumps(data))
    rows = []
    for i, (batch, isl, osl) in enumerate([(8, 32, 128), (64, 128, 64), (256, 64, 32), (1, 512, 64)]):
        row = {**ROW, "case_id": f"c{i}", "num_requests": batch, "input_len": isl, "output_len": osl,
               "workload": "fixed_batch" if batch <= 8 else "infinite_rate", "split": "fit"}
        case = load_cases([write_cases(tmp_path, [row], "one.csv")])[0]
        row["value"] = predict(case, str(truth)).predicted
        rows.append(row)
    return write_cases(tmp_path, rows, "measured.csv")


def test_fit_recovers_known_overhead_terms(tmp_path):
    path = _measured_with(tmp_path, per_step_us=1500.0, per_seq_us=20.0)
    tapped = [tap_case(c, "vllm@0.6") for c in load_cases([path])]
    start = EngineOverhead.from_preset(load_engine("vllm@0.6"))
    fitted = fit_overhead(tapped, start)
    assert fitted.per_step_s * 1e6 == pytest.approx(1500.0, rel=0.02)
    assert fitted.per_seq_s * 1e6 == pytest.approx(20.0, rel=0.05)
    assert fitted.per_token_s * 1e6 < 0.5


def test_calibrate_engine_writes_a_preset_and_reports_before_after(tmp_path):
    path = _measured_with(tmp_path, per_step_us=3000.0, per_seq_us=0.0)
    out = tmp_path / "my_vllm.yaml"
    result = invoke("calibrate", "engine", str(path), "--engine", "vllm@0.6", "--out", str(out), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["overhead_us"]["per_step_us"] == pytest.approx(3000.0, rel=0.02)
    assert report["median_abs_error_after"] < 0.005 < report["median_abs_error_before"]
    preset = load_engine(str(out))
    assert preset.overhead.per_step_us == report["overhead_us"]["per_step_us"]
    # the written preset is usable by simulate and validate
    again = invoke("validate", str(path), "--engine", str(out), "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["by_source"][-1]["median_abs_error"] < 0.005


def test_calibrate_engine_reads_a_vllm_bench_serve_json(tmp_path):
    bench = {"completed": 64, "total_input_tokens": 64 * 128, "total_output_tokens": 64 * 64,
             "output_throughput": 2500.0, "request_rate": "inf", "max_concurrency": None, "mean_e2el_ms": 1500.0}
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(bench))
    out = tmp_path / "fitted.yaml"
    result = invoke("calibrate", "engine", str(path), "--engine", "vllm@0.6", "--out", str(out), "-m", "llama-3.1-8b",
                    "-H", "h100-sxm", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["n_cases_fitted"] == 2
    missing = invoke("calibrate", "engine", str(path), "--engine", "vllm@0.6", "--out", str(out))
    assert missing.exit_code == 2 and "--model/--hardware" in missing.output


@pytest.mark.parametrize("workload", ["infinite_rate", "closed_loop", "fixed_batch"])
def test_closed_form_refit_equals_a_full_resimulation(tmp_path, workload):
    """The fit re-prices tapped steps instead of re-simulating; for time-invariant schedules the
    two must agree (this is what makes the fast fit honest)."""
    import dataclasses

    from sim.inputs.engines import EngineOverhead

    row = {**ROW, "workload": workload, "num_requests": 48, "input_len": 300, "output_len": 40,
           "concurrency": 16 if workload == "closed_loop" else "", "metric": "output_throughput_tok_s",
           "value": 1000.0}
    case = load_cases([write_cases(tmp_path, [row])])[0]
    tapped = tap_case(case, "vllm@0.6")
    over = dataclasses.replace(EngineOverhead.from_preset(load_engine("vllm@0.6")), per_step_s=900e-6,
                               per_seq_s=25e-6, per_token_s=2e-6)
    data = load_engine("vllm@0.6").model_dump()
    data["overhead"].update(per_step_us=900.0, per_seq_us=25.0, per_token_us=2.0)
    preset = tmp_path / "p.yaml"
    preset.write_text(json.dumps(data))
    assert tapped.metric(over) == pytest.approx(predict(case, str(preset)).predicted, rel=1e-9)
