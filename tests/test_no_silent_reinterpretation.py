"""No silent reinterpretation: a spec's seed is used unless a seed is given; the sniffer strips a
BOM and never guesses; strict JSON out; a sweep that fails before its first point leaves nothing."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.errors import InputError
from sim.inputs.config import EngineConfig
from sim.inputs.workload.load import load_workload, spec_seed
from sim.inputs.workload.sniff import sniff_format
from sim.output import json_text, write_json
from sim.run.invoke import resolve_seed

SPEC = """synthetic:
  arrival: {kind: poisson, rate_qps: 20}
  lengths: {prompt: {kind: uniform, low: 50, high: 500}, output: {kind: uniform, low: 5, high: 50}}
  n_requests: 30
"""


@pytest.fixture
def specs(tmp_path):
    paths = {}
    for name, seed in (("s5", 5), ("none", None)):
        paths[name] = tmp_path / f"{name}.yaml"
        paths[name].write_text(SPEC + (f"seed: {seed}\n" if seed is not None else ""))
    return paths


def run_json(*args: str) -> dict:
    result = CliRunner().invoke(app, ["simulate", "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_seed_precedence_flag_then_config_then_spec_then_0(specs, tmp_path):
    assert spec_seed(specs["s5"]) == 5 and spec_seed(specs["none"]) is None and spec_seed("splitwise_conv") is None
    assert resolve_seed(EngineConfig(), str(specs["s5"])).seed == 5
    assert resolve_seed(EngineConfig(seed=0), str(specs["s5"])).seed == 0  # explicitly 0 stays 0
    assert resolve_seed(EngineConfig(), str(specs["none"])).seed == 0
    config = tmp_path / "c.yaml"
    config.write_text("seed: 9\n")
    assert resolve_seed(EngineConfig.model_validate({"seed": 9}), str(specs["s5"])).seed == 9


def test_simulate_uses_the_spec_seed_unless_seed_is_given(specs):
    from_spec = run_json("-t", str(specs["s5"]))
    assert from_spec == run_json("-t", str(specs["s5"]), "--seed", "5") | {"wall_time_s": from_spec["wall_time_s"]}
    assert from_spec["seed"] == 5
    zero = run_json("-t", str(specs["s5"]), "--seed", "0")
    assert zero["seed"] == 0
    assert zero["ttft_s"] != from_spec["ttft_s"]  # the explicit flag wins over the spec
    workload_5 = load_workload(specs["s5"])
    workload_0 = load_workload(specs["s5"], seed=0)
    assert (workload_5.prompt_tokens != workload_0.prompt_tokens).any()


def test_sweep_points_take_the_spec_seed(specs, tmp_path):
    out = tmp_path / "sweep"
    result = CliRunner().invoke(app, ["sweep", "-g", "max_num_seqs=8", "-t", str(specs["s5"]), "-o", str(out),
                                      "--no-plots", "--workers", "1"])
    assert result.exit_code == 0, result.output
    import pandas as pd

    assert pd.read_parquet(out / "results.parquet")["seed"].tolist() == [5]


def test_bom_is_stripped_before_sniffing(tmp_path):
    path = tmp_path / "azure.csv"
    path.write_bytes(b"\xef\xbb\xbfTIMESTAMP,ContextTokens,GeneratedTokens\n"
                     b"2023-11-16 18:15:46.68,374,44\n2023-11-16 18:15:50.99,396,109\n")
    assert sniff_format(path) == "azure"
    trace = load_workload(path)
    assert trace.arrival_s.tolist() == pytest.approx([0.0, 4.31])  # the file's times, not Poisson ones


@pytest.mark.parametrize(("header", "outcome"), [
    ("arrived_at,num_prefill_tokens,num_decode_tokens", "splitwise"),  # contains `lengths`: the wider wins
    ("num_prefill_tokens,num_decode_tokens", "lengths"),
    ("arrival_s,prompt_tokens,output_tokens,TIMESTAMP,ContextTokens,GeneratedTokens", "match both azure and generic"),
    ("arrived_at,num_prefill_tokens", "looks like a splitwise trace without num_decode_tokens"),
    ("TIMESTAMP,ContextTokens", "looks like a azure trace without GeneratedTokens"),
])
def test_sniffer_never_guesses(tmp_path, header, outcome):
    path = tmp_path / "t.csv"
    path.write_text(header + "\n" + ",".join(["1"] * len(header.split(","))) + "\n")
    if outcome.isidentifier():
        assert sniff_format(path) == outcome
        return
    with pytest.raises(InputError, match="--format") as caught:
        sniff_format(path)
    assert outcome in caught.value.line()


def test_json_out_is_strict_json(tmp_path):
    data = {"rate": math.nan, "inf": [math.inf, -math.inf], "ok": 1.5}
    assert json.loads(json_text(data)) == {"rate": None, "inf": [None, None], "ok": 1.5}
    write_json(tmp_path / "x.json", data)
    assert "NaN" not in (tmp_path / "x.json").read_text() and "Infinity" not in (tmp_path / "x.json").read_text()


def test_a_run_where_every_request_is_rejected_still_writes_valid_json(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,9000,10\n")  # longer than max_model_len
    result = CliRunner().invoke(app, ["simulate", "-t", str(trace), "--max-model-len", "4096", "-o",
                                      str(tmp_path / "out"), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text(), parse_constant=pytest.fail)
    assert summary["n_rejected"] == 1


def test_sweep_failing_before_its_first_point_writes_nothing(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("arrival_s,prompt_tokens,output_tokens\n0,-4,5\n")
    result = CliRunner().invoke(app, ["sweep", "-g", "max_num_seqs=8,16", "-t", str(bad), "--workers", "1",
                                      "-o", str(tmp_path / "out"), "--no-plots"])
    assert result.exit_code == 2 and result.stderr.startswith("error: ")
    assert not (tmp_path / "out").exists()
    existing = tmp_path / "existing"
    existing.mkdir()
    result = CliRunner().invoke(app, ["sweep", "-g", "max_num_seqs=8", "-t", str(bad), "--workers", "1",
                                      "-o", str(existing), "--no-plots"])
    assert result.exit_code == 2 and list(existing.iterdir()) == []  # no lock, no parts/, no results.parquet
