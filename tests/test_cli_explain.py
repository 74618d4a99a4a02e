"""Results that explain themselves: --version, provenance and *_ms fields in summary.json, --slo
goodput and attainment, --percentiles, --qps Poisson load, --csv, the sweep's SLO verdict and
best-first order, and the generated workload schema page."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from sim import __version__
from sim.cli import app
from sim.cli.schema_doc import markdown
from sim.inputs.slo import parse_slo, slo_report
from sim.inputs.workload import load_workload
from sim.run.provenance import trace_sha256
from sim.sweep.slo import add_slo_columns, sort_best_first

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner()


def test_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.strip() == f"infersim {__version__}"


@pytest.fixture(scope="module")
def slo_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    result = runner.invoke(app, ["simulate", "--max-requests", "150", "--qps", "6", "--seed", "3",
                                 "--slo", "ttft_p99=150ms", "--slo", "tpot_p95=0.02s", "--percentiles", "50,90,95,99",
                                 "--csv", str(out / "requests.csv"), "--out", str(out / "run"), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads((out / "run" / "summary.json").read_text()), out


def test_summary_records_version_config_trace_and_seed(slo_run):
    summary, _ = slo_run
    assert summary["infersim_version"] == __version__ and summary["seed"] == 3
    assert summary["config"]["seed"] == 3 and summary["config"]["model"] == "llama-3-8b"
    assert summary["trace"]["n_requests"] == 150 and summary["trace"]["path"].endswith("splitwise_conv.csv")
    assert len(summary["trace"]["sha256"]) == 64


def test_trace_hash_is_of_the_content():
    trace = load_workload("splitwise_conv").take(range(50))
    copy = trace.take(np.arange(50))
    copy.source = "elsewhere.csv"
    assert trace_sha256(copy) == trace_sha256(trace)
    copy.output_tokens = copy.output_tokens + 1
    assert trace_sha256(copy) != trace_sha256(trace)
    assert trace_sha256(trace) != hashlib.sha256(b"").hexdigest()


def test_percentiles_and_ms_fields(slo_run):
    summary, _ = slo_run
    for key in ("ttft", "tpot", "itl", "e2e", "queue_delay"):
        seconds, millis = summary[f"{key}_s"], summary[f"{key}_ms"]
        assert list(seconds) == ["mean", "p50", "p90", "p95", "p99", "max"] == list(millis)
        assert seconds["p90"] <= seconds["p95"] <= seconds["p99"]
        assert millis["p95"] == pytest.approx(seconds["p95"] * 1e3)


def test_slo_goodput_and_attainment_follow_the_requests(slo_run):
    summary, out = slo_run
    frame = pd.read_csv(out / "requests.csv")
    requests = pd.read_parquet(out / "run" / "requests.parquet")
    assert len(frame) == 150 and list(frame.columns) == list(requests.columns)
    finished = frame[frame["status"] == "FINISHED"]
    good = (frame["status"] == "FINISHED") & (frame["ttft_s"] <= 0.15) & (frame["tpot_s"].fillna(0) <= 0.02)
    assert summary["goodput"]["n_met"] == good.sum() == summary["slo_attainment"]["goodput"]["n_met"]
    report = summary["slo_attainment"]["per_slo"]
    assert report["ttft_p99"]["value_s"] == pytest.approx(np.percentile(finished["ttft_s"], 99))
    assert report["ttft_p99"]["limit_ms"] == pytest.approx(150)
    assert report["tpot_p95"]["attainment"] == pytest.approx((finished["tpot_s"].fillna(0) <= 0.02).sum() / 150)
    assert summary["slo_attainment"]["met"] == (report["ttft_p99"]["met"] and report["tpot_p95"]["met"])


def test_qps_gives_poisson_arrivals_at_that_rate(tmp_path):
    result = runner.invoke(app, ["simulate", "--max-requests", "400", "--qps", "20", "--csv", str(tmp_path / "r.csv")])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(tmp_path / "r.csv")
    gaps = np.diff(np.sort(frame["arrival_s"].to_numpy()))
    assert 16.5 < 1 / gaps.mean() < 24  # 400 arrivals at ~20 req/s (3.5 standard errors)
    assert 0.8 < gaps.std() / gaps.mean() < 1.2  # exponential gaps: CV 1
    lengths = load_workload("splitwise_conv").take(range(400))
    assert (frame["prompt_tokens"].to_numpy() == lengths.prompt_tokens).all()  # the trace's lengths, in order


def test_slo_report_meets_by_hand():
    frame = pd.DataFrame({"status": ["FINISHED"] * 4 + ["REJECTED"], "ttft_s": [0.1, 0.2, 0.3, 0.4, np.nan],
                          "tpot_s": [0.01, np.nan, 0.01, 0.05, np.nan], "e2e_s": [1, 2, 3, 4, np.nan]})
    report = slo_report(frame, parse_slo(["ttft_p50=0.25s", "tpot_p90=40ms"], goodput_min=0.8), 10.0)
    assert report["per_slo"]["ttft_p50"]["value_s"] == pytest.approx(0.25) and report["per_slo"]["ttft_p50"]["met"]
    assert report["per_slo"]["ttft_p50"]["attainment"] == pytest.approx(2 / 5)
    assert not report["per_slo"]["tpot_p90"]["met"]  # p90 of (0.01, 0.01, 0.05) = 0.042 > 0.04
    assert report["goodput"]["n_met"] == 2 and report["goodput"]["request_throughput"] == pytest.approx(0.2)
    assert report["finished_share"] == pytest.approx(0.8) and not report["met"]


def test_sweep_rows_get_a_verdict_and_best_first_order():
    frame = pd.DataFrame({"point_id": ["a", "b", "c"], "n_requests": [10, 10, 10], "n_finished": [10, 10, 8],
                          "ttft_s_p99": [0.5, 2.5, 0.1], "goodput_request_throughput": [3.0, 5.0, 4.0]})
    judged = add_slo_columns(frame, parse_slo(["ttft_p99=1s"], goodput_min=0.9))
    assert judged["meets_slo"].tolist() == [True, False, False]
    assert judged["ttft_p99_ratio"].tolist() == pytest.approx([0.5, 2.5, 0.1])
    assert sort_best_first(judged, "goodput_request_throughput")["point_id"].tolist() == ["a", "b", "c"]
    assert sort_best_first(frame, "ttft_s_p99")["point_id"].tolist() == ["c", "a", "b"]  # latency: lower first


def test_sweep_with_slo_sorts_best_first(tmp_path):
    result = runner.invoke(app, ["sweep", "--grid", "max_num_seqs=2,64", "--max-requests", "60", "--workers", "1",
                                 "--slo", "ttft_p99=1s", "--out", str(tmp_path / "sw"), "--no-plots"])
    assert result.exit_code == 0, result.output
    table_rows = [line for line in result.stdout.splitlines() if line.startswith("│")]
    assert table_rows[0].split("│")[1].strip() == "64"  # the better point first
    assert "True" in table_rows[0] and "False" in table_rows[1]


@pytest.mark.parametrize(("args", "needle"), [
    (["simulate", "--percentiles", "50,100"], "--percentiles"),
    (["simulate", "--qps", "-1"], "--qps"),
    (["simulate", "--qps", "2", "--rate-scale", "2"], "--qps"),
    (["simulate", "--slo", "ttft_p99=fast"], "--slo"),
    (["sweep", "--grid", "max_num_seqs=8", "--slo", "bad"], "--slo"),
    (["sweep", "--grid", "max_num_seqs=8", "--max-requests", "20", "--objective", "nope", "--workers", "1"],
     "--objective"),
])
def test_bad_input_is_one_line_exit_2(args, needle, tmp_path):
    if args[0] == "sweep":
        args = [*args, "--out", str(tmp_path / "sw")]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], result.stderr


def test_schema_page_is_generated_from_the_models():
    assert (REPO / "workloads" / "SCHEMA.md").read_text() == markdown()
    result = runner.invoke(app, ["workload", "schema", "--json"])
    assert result.exit_code == 0 and "WorkloadSpec" in json.loads(result.stdout)["title"]
    for key in ("`synthetic`", "`rate_qps`", "`clip_max_model_len`"):
        assert key in markdown()
