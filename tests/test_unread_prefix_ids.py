"""A run that never reads prefix hash ids does not hold them (they are most of a synthetic trace's
memory), and nothing it reports changes: the same summary, the same workload hash."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.inputs.config import EngineConfig
from sim.inputs.workload import load_workload
from sim.run.invoke import without_unread_prefix_ids
from sim.run.provenance import trace_sha256
from sim.run.simulate import simulate
from sim.run.summary import summarize

SPEC = """synthetic:
  arrival: {kind: poisson, rate_qps: 20}
  lengths: {trace: sharegpt}
  n_requests: 300
seed: 3
"""


@pytest.fixture(scope="module")
def spec_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("spec") / "spec.yaml"
    path.write_text(SPEC)
    return path


@pytest.mark.parametrize(("knobs", "reads"), [
    ({"policy": "continuous"}, False),
    ({"policy": "chunked", "replicas": 2, "router": "least_kv"}, False),
    ({"policy": "radix"}, True),
    ({"policy": "chunked", "replicas": 2, "router": "prefix_affinity"}, True),
    ({"policy": "chunked", "prefill_replicas": 1, "decode_replicas": 1, "prefill": {"policy": "radix"}}, True),
    ({"policy": "chunked", "prefill_replicas": 1, "decode_replicas": 1}, False),
])
def test_ids_are_dropped_only_where_nothing_reads_them(spec_path, knobs, reads):
    cfg = EngineConfig(**knobs)
    trace = load_workload(str(spec_path))
    assert trace.has_hash_ids
    slim = without_unread_prefix_ids(cfg, trace)
    assert cfg.reads_prefix_ids() == reads and slim.has_hash_ids == reads
    assert trace_sha256(slim) == trace_sha256(trace)  # the workload is still named by its full content
    if not reads:
        full, dropped = summarize(simulate(cfg, trace)), summarize(simulate(cfg, slim))
        full.pop("wall_time_s")
        dropped.pop("wall_time_s")
        assert dropped == full


def test_the_cli_reports_the_full_traces_hash(spec_path):
    result = CliRunner().invoke(app, ["simulate", "--trace", str(spec_path), "--model", "llama-3-8b", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["trace"]["sha256"] == trace_sha256(load_workload(str(spec_path)))
