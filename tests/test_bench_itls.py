"""bench_serve.json's `itls` (--save-detailed) are each request's own simulated gaps: pooled, they are
the gaps behind `p99_itl_ms`, so a dashboard's P99 over them matches it (issue 45 item 5)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.engine.request_gaps import BIN_RELATIVE_WIDTH, RequestGaps
from sim.run.weighted_percentiles import weighted_percentiles

runner = CliRunner()


def _detailed_run(tmp_path, *extra: str) -> tuple[dict, dict]:
    out = tmp_path / "run"
    result = runner.invoke(app, ["simulate", "-t", "splitwise_conv", "--max-requests", "300", "--rate-scale", "8",
                                 "-o", str(out), "--save-detailed", *extra])
    assert result.exit_code == 0, result.output
    return json.loads((out / "bench_serve.json").read_text()), json.loads((out / "summary.json").read_text())


@pytest.mark.parametrize("extra", [(), ("--engine", "vllm"), ("--replicas", "2", "--workers", "2")])
def test_pooled_itls_give_the_files_own_itl_percentiles(tmp_path, extra):
    bench, summary = _detailed_run(tmp_path, *extra)
    pooled = np.array([gap for gaps in bench["itls"] for gap in gaps]) * 1e3
    assert pooled.size == sum(max(n - 1, 0) for n in bench["output_lens"])
    ones = np.ones(pooled.size, dtype=np.int64)
    p50, p90, p99 = weighted_percentiles(pooled, ones, [0.5, 0.9, 0.99])
    assert (p50, p90, p99) == (bench["median_itl_ms"], bench["p90_itl_ms"], bench["p99_itl_ms"])
    assert np.percentile(pooled, 99) == pytest.approx(bench["p99_itl_ms"], rel=0.01)  # a dashboard's linear P99
    assert pooled.mean() == pytest.approx(bench["mean_itl_ms"], rel=1e-9)
    assert summary["itl_s"]["p99"] * 1e3 == pytest.approx(bench["p99_itl_ms"], rel=1e-12)
    for gaps, ttft, latency in zip(bench["itls"], bench["ttfts"], bench["latencies"], strict=True):
        assert sum(gaps) == pytest.approx(latency - ttft, rel=1e-9, abs=1e-9)
    # the tail is real, not each request's mean repeated
    assert max(max(g) for g in bench["itls"] if g) > 2 * np.mean([np.mean(g) for g in bench["itls"] if g])


def test_compaction_bounds_memory_and_keeps_sums_and_sizes():
    rng = np.random.default_rng(0)
    exact = RequestGaps(compact_at=10**9)
    bounded = RequestGaps(compact_at=5_000)
    for step in range(400):
        rows = rng.choice(50, size=30, replace=False)
        values = rng.lognormal(-4, 0.6, size=30)
        exact.add(rows, values)
        bounded.add(rows, values)
        if step % 50 == 0:
            later = rng.lognormal(-4, 0.2, size=20)
            exact.add_run(rows, values, later, seq_steps=np.full(30, 15))
            bounded.add_run(rows, values, later, seq_steps=np.full(30, 15))
    assert bounded.compacted and bounded.rows.size < exact.rows.size
    owners = np.arange(50)
    for a, b in zip(exact.lists(owners, 50), bounded.lists(owners, 50), strict=True):
        assert len(a) == len(b) and sum(a) == pytest.approx(sum(b), rel=1e-9)
        assert np.allclose(sorted(a), sorted(b), rtol=BIN_RELATIVE_WIDTH)
