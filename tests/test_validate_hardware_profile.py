"""`infersim validate --hardware-profile FILE`: datasheet vs calibrated error side by side on the cases of
the profile's base GPU; bad input is one line and exit 2."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from calibrate.fit import with_terms
from sim.cli import app
from sim.inputs.hardware import load_hardware
from sim.validate.cases import load_cases
from sim.validate.run import predict

ROW = dict(case_id="lat-8b-h200", source="hand-made", engine="vllm@0.6", model="llama-3.1-8b", gpu="H200", tp=1,
           weight_dtype="bf16", workload="fixed_batch", num_requests=8, input_len=32, output_len=128,
           metric="mean_e2e_latency_ms", value=833.4, split="score")


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture()
def files(tmp_path):
    cases = tmp_path / "cases.csv"
    pd.DataFrame([ROW, {**ROW, "case_id": "lat-8b-h100", "gpu": "H100"}]).to_csv(cases, index=False)
    slower = with_terms(load_hardware("h200"), {"memory": 0.6})  # a "calibrated" H200: slower HBM reads
    data = slower.model_dump(mode="python", exclude_none=True) | {"name": "h200-mine",
                                                                  "calibration": {"base_profile": "h200"}}
    profile = tmp_path / "h200-mine.yaml"
    profile.write_text(yaml.safe_dump(data, sort_keys=False))
    return cases, profile


def test_side_by_side_on_the_base_gpus_cases_only(files):
    cases, profile = files
    result = invoke("validate", cases, "--hardware-profile", profile, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["base"] == "h200" and [r["case_id"] for r in report["cases"]] == ["lat-8b-h200"]
    row = report["cases"][0]
    case = load_cases([cases])[0]
    assert row["datasheet"] == predict(case).predicted  # the bundled profile, as plain `validate` runs it
    assert row["calibrated"] == predict(case, hardware=str(profile)).predicted
    assert row["calibrated"] > row["datasheet"]  # slower HBM: a longer decode
    assert row["calibrated_error"] == pytest.approx((row["calibrated"] - 833.4) / 833.4)
    assert report["median_abs_error"]["calibrated"]["score"] == pytest.approx(abs(row["calibrated_error"]))
    table = invoke("validate", cases, "--hardware-profile", profile)
    assert table.exit_code == 0 and "calibrated" in table.stdout and "datasheet" in table.stdout


@pytest.mark.parametrize("change, message", [
    ("missing", "an existing profile YAML"),
    ("other-gpu", "cases on a100-80g-sxm"),
    ("unbundled-base", "calibration.base_profile"),
])  # fmt: skip
def test_bad_profiles_are_one_line_exit_2(files, tmp_path, change, message):
    cases, profile = files
    if change == "missing":
        profile = tmp_path / "nope.yaml"
    else:
        data = yaml.safe_load(profile.read_text())
        data["calibration"]["base_profile"] = "a100-80g-sxm" if change == "other-gpu" else "my-gpu"
        profile.write_text(yaml.safe_dump(data, sort_keys=False))
    result = invoke("validate", cases, "--hardware-profile", profile)
    assert result.exit_code == 2
    assert message in result.output and len(result.output.strip().splitlines()) == 1, result.output


def test_progress_lines_on_stderr_and_none_with_json(files):
    """A long comparison (12 minutes on the bundled cases) says how far it is, on stderr only."""
    cases, profile = files
    table = invoke("validate", cases, "--hardware-profile", profile)
    assert "validate: cases on h200, datasheet and calibrated: 1/1" in table.stderr
    assert "validate:" not in table.stdout
    assert "validate:" not in invoke("validate", cases, "--hardware-profile", profile, "--json").stderr
