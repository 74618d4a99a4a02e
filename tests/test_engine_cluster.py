"""A mixed cluster: one hardware profile per replica."""

import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.inputs.config import EngineConfig
from sim.run.invoke import load_run_workload, run


def test_each_replica_runs_on_its_own_hardware():
    workload = load_run_workload("splitwise_conv", rate_scale=6, max_requests=600)
    cfg = EngineConfig(replicas=2, replica_hardware=["h100-sxm", "l40s"], router="round_robin")
    output = run(cfg, workload)
    summary, frame = output.summary, output.requests
    assert summary["replica_hardware"] == ["h100-sxm", "l40s"]
    l40s_blocks, h100_blocks = summary["num_gpu_blocks_per_replica"][1], summary["num_gpu_blocks_per_replica"][0]
    assert l40s_blocks < h100_blocks / 2  # 45 GiB against 80 GiB, minus the same weights
    by_replica = frame[frame.status == "FINISHED"].groupby("replica")
    assert set(by_replica.groups) == {0, 1}
    tpot = by_replica["tpot_s"].mean()
    assert tpot[1] > 2 * tpot[0]  # 864 GB/s against 3350 GB/s of HBM bandwidth: decode is memory-bound


def test_replica_hardware_must_match_the_replica_count():
    with pytest.raises(ValueError, match="one profile per replica"):
        EngineConfig(replicas=3, replica_hardware=["h100-sxm", "l40s"])
    result = CliRunner().invoke(app, ["simulate", "--max-requests", "5", "--replicas", "3",
                                      "--replica-hardware", "h100-sxm,l40s"])
    assert result.exit_code == 2
    assert "one profile per replica" in result.output and "Traceback" not in result.output



def test_mixed_cluster_header_names_every_hardware_kind(tmp_path):
    """QA: the run header of a mixed cluster named only the base --hardware ("2 x 1 x h100-sxm")."""
    result = CliRunner().invoke(app, ["simulate", "--max-requests", "10", "--replica-hardware", "h100-sxm,h200",
                                      "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "h100-sxm+h200" in result.output
