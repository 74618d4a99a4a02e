"""The requests table as plain columns (what `simulate` writes and summarizes without pandas) and
as a DataFrame give the same summary, SLO report and parquet rows, and those agree with the same
quantities computed here with pandas; the command line starts without importing pandas."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from sim.inputs.config import EngineConfig
from sim.inputs.slo import parse_slo, slo_report
from sim.output import json_text
from sim.run.invoke import load_run_workload, run
from sim.run.simulate import simulate
from sim.run.summary import requests_columns, requests_frame, summarize

TTFT_LIMIT_S, TPOT_LIMIT_S = 0.05, 0.02
REPORT_SLO = parse_slo(["ttft_p90=50ms", "tpot_p99=20ms"], goodput_min=0.5)


def _workload():
    """A busy Splitwise slice in which every 7th request generates one token (it has no TPOT)."""
    workload = load_run_workload("splitwise_conv", rate_scale=6, max_requests=300)
    workload.output_tokens = workload.output_tokens.copy()
    workload.output_tokens[::7] = 1
    return workload


# max_model_len 2048 rejects the longest prompts; the limits fail some finished requests, not all
CFG = EngineConfig(policy="chunked", max_model_len=2048, slo={"ttft_s": TTFT_LIMIT_S, "tpot_s": TPOT_LIMIT_S})


@pytest.fixture(scope="module")
def result():
    return simulate(CFG, _workload())


def test_the_fixture_has_rejected_requests_missing_tpots_and_partial_goodput(result):
    frame = requests_frame(result)
    finished = frame[frame["status"] == "FINISHED"]
    assert (frame["status"] == "REJECTED").any()
    assert finished["tpot_s"].isna().any()
    good = summarize(result)["goodput"]["fraction"]
    assert 0.1 < good < 0.9


def test_columns_and_frame_give_the_same_summary_and_slo_report(result):
    columns, frame = requests_columns(result), requests_frame(result)
    assert json_text(summarize(result, columns)) == json_text(summarize(result, frame))
    reports = [slo_report(table, REPORT_SLO, result.sim_duration_s) for table in (columns, frame)]
    assert json_text(reports[0]) == json_text(reports[1])


def test_summary_matches_pandas_arithmetic_on_the_frame(result):
    frame = requests_frame(result)
    summary = summarize(result, requests_columns(result))
    finished = frame[frame["status"] == "FINISHED"]
    assert summary["n_finished"] == len(finished)
    assert summary["n_rejected"] == int((frame["status"] == "REJECTED").sum())
    good = finished[(finished["ttft_s"] <= TTFT_LIMIT_S) & (finished["tpot_s"].fillna(0.0) <= TPOT_LIMIT_S)]
    assert summary["goodput"]["n_met"] == len(good)
    assert summary["output_throughput_tok_s"] == finished["output_tokens"].sum() / result.sim_duration_s
    attribution = summary["latency_attribution"]
    assert attribution["mean_prefill_s"] == finished["attr_prefill_s"].mean()
    assert attribution["mean_interference_s"] == finished["attr_interference_s"].mean()
    by_e2e = finished.sort_values("e2e_s", kind="stable")
    p99 = by_e2e.iloc[int(np.ceil(0.99 * len(by_e2e))) - 1]
    assert attribution["p99_request_id"] == p99["request_id"] and attribution["p99_decode_s"] == p99["attr_decode_s"]
    report = slo_report(requests_columns(result), REPORT_SLO, result.sim_duration_s)
    assert report["per_slo"]["ttft_p90"]["value_s"] == np.percentile(finished["ttft_s"], 90)
    within_tpot = (frame["status"] == "FINISHED") & (frame["tpot_s"].fillna(0.0) <= TPOT_LIMIT_S)
    assert report["per_slo"]["tpot_p99"]["attainment"] == within_tpot.mean()


def test_the_written_parquet_is_the_requests_frame(tmp_path):
    output = run(CFG, _workload(), tmp_path / "run")
    written = pd.read_parquet(tmp_path / "run" / "requests.parquet")
    pd.testing.assert_frame_equal(written, output.requests)
    pd.testing.assert_frame_equal(output.requests, requests_frame(output.result))


def test_the_command_line_starts_without_pandas():
    check = ("import sys, sim.cli, sim.run.invoke, sim.run.summary, sim.inputs.slo, sim.sweep.point; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pandas', 'matplotlib')))")
    loaded = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"
