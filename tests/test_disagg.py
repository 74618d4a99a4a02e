"""Disaggregated prefill/decode: a hand-checkable handoff (times, blocks held on both sides while
the KV moves, attribution), link resolution from the profiles, back-pressure from a small decode
cache, decode runs equal single steps, determinism, and bad input -> one line, exit 2."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import STEP_S, ConstantCost, make_trace
from test_engine_decode_runs import assert_frames_match, assert_summaries_match, by_replica, run_both
from typer.testing import CliRunner

from sim.cli import app
from sim.engine.disagg.build import group_config
from sim.engine.disagg.link import resolve_link
from sim.engine.disagg.roles import PrefillRole
from sim.errors import InputError
from sim.inputs.config import EngineConfig
from sim.inputs.hardware import load_hardware
from sim.run.attribution import PARTS
from sim.run.invoke import load_run_workload
from sim.run.simulate import simulate
from sim.run.summary import requests_frame, summarize

BLOCK = 16
# ConstantCost moves 1 byte per token and layer on one layer: a 32-token prompt is 2 blocks = 32 bytes;
# at 32 / STEP_S bytes/s its transfer takes exactly one step.
ONE_STEP_GB_S = 32 / STEP_S / 1e9


def _disagg_cfg(**knobs):
    base = dict(policy="chunked", prefill_replicas=1, decode_replicas=1, kv_transfer_gb_s=ONE_STEP_GB_S,
                kv_transfer_latency_us=0.0, max_model_len=256, max_num_batched_tokens=256)
    base.update(knobs)
    return EngineConfig(**base)


def test_one_request_prefills_moves_and_decodes(monkeypatch):
    held_both = []
    original = PrefillRole.release_handed_off

    def release(self, rid):
        decode = self.coordinator.decode[0].sched
        held_both.append((len(self.blocks.table(rid)), len(decode.blocks.table(rid))))
        original(self, rid)

    monkeypatch.setattr(PrefillRole, "release_handed_off", release)
    result = simulate(_disagg_cfg(), make_trace([(0.0, 32, 4)]), cost=ConstantCost())
    row = requests_frame(result).iloc[0]
    # prefill [0, S] samples token 1; KV moves [S, 2S]; decode replica makes tokens 2..4 in [2S, 5S]
    assert row["status"] == "FINISHED" and row["replica"] == 1
    assert row["ttft_s"] == STEP_S and row["e2e_s"] == 5 * STEP_S
    assert row["kv_transfer_s"] == STEP_S
    assert held_both == [(2, 2)]  # 32 prompt tokens = 2 blocks, on both sides until it landed
    assert row["attr_prefill_s"] == STEP_S and row["attr_kv_transfer_s"] == STEP_S
    assert row["attr_decode_s"] == 3 * STEP_S and row["attr_queue_s"] == 0.0
    for replica in result.replicas:
        assert replica.sched.blocks.n_used == 0
    summary = summarize(result)
    assert summary["disaggregation"]["n_transfers"] == 1
    assert summary["disaggregation"]["link_kind"] == "override"


def test_a_one_token_request_never_moves():
    result = simulate(_disagg_cfg(), make_trace([(0.0, 32, 1)]), cost=ConstantCost())
    row = requests_frame(result).iloc[0]
    assert row["status"] == "FINISHED" and row["replica"] == 0 and row["kv_transfer_s"] == 0.0
    assert result.disagg.coordinator.n_transfers == 0


def test_transfers_from_one_prefill_replica_queue_on_its_link():
    trace = make_trace([(0.0, 32, 3), (0.0, 32, 3)])
    frame = requests_frame(simulate(_disagg_cfg(decode_replicas=2), trace, cost=ConstantCost()))
    # both prompts prefill in one step; the second transfer waits for the first on the link
    assert sorted(frame["kv_transfer_s"]) == [STEP_S, 2 * STEP_S]
    assert sorted(frame["replica"]) == [1, 2]  # least_kv spreads them over the decode replicas


def test_link_from_profiles():
    h100, l40s = load_hardware("h100-sxm"), load_hardware("l40s")
    inside = resolve_link(h100, h100, 8, 2, 2, None, None)
    assert inside.kind == "nvlink" and inside.bytes_s == 450e9 and inside.n_parallel == 2
    across = resolve_link(h100, h100, 16, 4, 2, None, None)
    assert across.kind == "network" and across.bytes_s == 50e9 and across.latency_s == pytest.approx(10e-6)
    assert across.transfer_s(100e9) == pytest.approx(10e-6 + 1.0)  # 100 GB over 2 x 50 GB/s
    assert resolve_link(l40s, l40s, 16, 1, 1, 25.0, 5.0).bytes_s == 25e9
    assert resolve_link(h100, h100, 8, 1, 1, None, 50.0).latency_s == pytest.approx(50e-6)


@pytest.fixture(scope="module")
def splitwise():
    return load_run_workload("splitwise_conv", rate_scale=4, max_requests=300)


def _frames_equal(cfg, workload):
    runs = [requests_frame(simulate(cfg, workload)) for _ in range(2)]
    assert runs[0].equals(runs[1])
    return runs[0]


def test_small_decode_cache_pushes_back_and_everything_finishes(splitwise):
    cfg = EngineConfig(policy="chunked", prefill_replicas=2, decode_replicas=1,
                       decode={"gpu_memory_utilization": 0.5})
    result = simulate(cfg, splitwise)
    frame = requests_frame(result)
    assert (frame["status"] == "FINISHED").all()
    assert result.disagg.coordinator.wait_s > 0  # transfers waited for decode blocks
    done = frame[frame["status"] == "FINISHED"]
    parts = done[[f"attr_{p}_s" for p in PARTS]].sum(axis=1)
    assert (parts - done["e2e_s"]).abs().max() < 1e-9
    assert (done["attr_kv_transfer_s"] == done["kv_transfer_s"]).all()
    for replica in result.replicas:
        assert not replica.sched.blocks._tables


@pytest.mark.parametrize("knobs", [
    {"policy": "continuous", "prefill_replicas": 1, "decode_replicas": 2},
    {"policy": "chunked", "prefill_replicas": 2, "decode_replicas": 1, "decode": {"gpu_memory_utilization": 0.6}},
    {"policy": "chunked", "prefill_replicas": 1, "decode_replicas": 2, "spec_tokens": 2, "spec_acceptance": [0.7]},
    {"policy": "radix", "prefill_replicas": 1, "decode_replicas": 1, "decode": {"policy": "continuous"}},
])
def test_disagg_runs_are_deterministic(splitwise, knobs):
    frame = _frames_equal(EngineConfig(**knobs), splitwise)
    assert (frame["status"] == "FINISHED").all()
    assert (frame["replica"] >= knobs["prefill_replicas"]).sum() > 0.9 * len(frame)


@pytest.mark.parametrize("knobs", [
    {"policy": "continuous", "prefill_replicas": 1, "decode_replicas": 2},
    {"policy": "chunked", "prefill_replicas": 2, "decode_replicas": 1, "decode": {"gpu_memory_utilization": 0.6}},
])
def test_disagg_decode_runs_equal_single_steps(splitwise, monkeypatch, knobs):
    (frame, summary, steps, n_commits), (frame_1, summary_1, steps_1, _) = run_both(EngineConfig(**knobs), splitwise,
                                                                                    monkeypatch)
    assert n_commits < 0.7 * summary["n_steps"]  # decode runs really ran
    assert_frames_match(frame, frame_1)
    assert summary.pop("disaggregation") == summary_1.pop("disaggregation")
    assert_summaries_match(summary, summary_1)
    assert_frames_match(by_replica(steps), by_replica(steps_1), skip=("kv_blocks_used",))


def test_group_knobs_apply_to_their_group():
    workload = load_run_workload("splitwise_conv", rate_scale=1, max_requests=40)
    cfg = EngineConfig(model="llama-3-70b", prefill_replicas=1, decode_replicas=1, prefill={"tp": 4},
                       decode={"tp": 2, "hardware": "h200"})
    summary = summarize(simulate(cfg, workload))
    d = summary["disaggregation"]
    assert d["n_gpus"] == 6 and d["prefill_tp"] == 4 and d["decode_hardware"] == "h200"
    assert d["link_kind"] == "network"  # two kinds of GPU: not one NVLink domain
    assert summary["n_finished"] == 40
    # the cluster's replicas, not the base config's one (QA: summary said replicas 1, one hardware)
    assert summary["replicas"] == 2 and summary["replica_hardware"] == ["h100-sxm", "h200"]
    assert len(summary["num_gpu_blocks_per_replica"]) == summary["replicas"]


def test_group_policy_drops_preset_knobs_it_does_not_take():
    """QA: --engine sglang (radix, lpm ordering, chunk_size) with --prefill-policy continuous failed
    on the preset's radix-only knobs, which the continuous group never asked for."""
    result = CliRunner().invoke(app, ["simulate", "--engine", "sglang", "--prefill-replicas", "1",
                                      "--decode-replicas", "1", "--prefill-policy", "continuous",
                                      "--max-requests", "20", "--out", "/dev/null/never"])
    assert "radix_ordering" not in result.output
    cfg = EngineConfig(policy="radix", radix_ordering="lpm", chunk_size=4096, cpu_cache_gib=1.0, prefill_replicas=1,
                       decode_replicas=1, prefill={"policy": "continuous"})
    prefill, decode = group_config(cfg, "prefill"), group_config(cfg, "decode")
    assert (prefill.policy, prefill.radix_ordering, prefill.chunk_size, prefill.cpu_cache_gib) == \
        ("continuous", "fcfs", None, 0.0)
    assert (decode.policy, decode.radix_ordering, decode.chunk_size, decode.cpu_cache_gib) == \
        ("radix", "lpm", 4096, 1.0)


def test_inherited_chunk_cap_fits_the_groups_budget_and_group_errors_name_the_group():
    """QA: engine sglang (chunk_size 8192) with `decode: {policy: chunked, max_num_batched_tokens: 2048}`
    failed with 'EngineConfig: ... chunk_size must not exceed max_num_batched_tokens'."""
    cfg = EngineConfig(policy="radix", chunk_size=8192, prefill_replicas=1, decode_replicas=1,
                       decode={"policy": "chunked", "max_num_batched_tokens": 2048})
    assert group_config(cfg, "decode").chunk_size == 2048 and group_config(cfg, "prefill").chunk_size == 8192
    own = EngineConfig(policy="chunked", prefill_replicas=1, decode_replicas=1,
                       decode={"chunk_size": 4096, "max_num_batched_tokens": 2048})
    with pytest.raises(InputError, match=r"^decode group .*chunk_size must not exceed max_num_batched_tokens"):
        group_config(own, "decode")


@pytest.mark.parametrize("args", [
    ["--prefill-replicas", "0", "--decode-replicas", "1"],
    ["--prefill-replicas", "1", "--decode-replicas", "0"],
    ["--prefill-replicas", "1"],
    ["--prefill-replicas", "1", "--decode-replicas", "1", "--kv-transfer-gb-s", "-5"],
    ["--prefill-replicas", "1", "--decode-replicas", "1", "--kv-transfer-latency-us", "-1"],
    ["--prefill-replicas", "1", "--decode-replicas", "1", "--replicas", "2"],
    ["--prefill-replicas", "8", "--decode-replicas", "8", "--hardware", "l40s"],
    ["--prefill-replicas", "1", "--decode-replicas", "1", "--prefill-policy", "static"],
    ["--prefill-replicas", "1", "--decode-replicas", "1", "--decode-tp", "3", "--model", "llama-3-70b"],
])
def test_bad_disagg_input_one_line_exit_2(args, tmp_path):
    result = CliRunner().invoke(app, ["simulate", "--max-requests", "5", "--out", str(tmp_path / "o"), *args])
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert "Traceback" not in result.output


def test_compare_splits_pairs_each_layout_with_aggregated_at_equal_gpus():
    from sim.run.disagg_compare import compare_splits

    base = EngineConfig(policy="chunked", slo={"ttft_s": 2.0, "tpot_s": 0.1})

    def workload_for(n_replicas):
        return load_run_workload("splitwise_conv", rate_scale=n_replicas, max_requests=60)

    results = compare_splits(base, workload_for, [(1, 1), (1, 2), (2, 1)])
    assert [r.label for r in results] == ["aggregated x2", "1P:1D", "aggregated x3", "1P:2D", "2P:1D"]
    assert [r.n_gpus for r in results] == [2, 2, 3, 3, 3]
    for r in results:
        row = r.row()
        assert row["finished"] == 60
        assert row["goodput_per_gpu"] == pytest.approx(row["goodput_req_s"] / r.n_gpus)
    assert results[1].row()["kv_transfer_p99_s"] > 0 and results[0].row()["kv_transfer_p99_s"] is None


def test_closed_loop_clients_hear_completions_on_decode_replicas():
    from sim.inputs.workload.trace import ClosedLoop

    pool = make_trace([(0.0, 32 + i, 3 + i % 4) for i in range(12)])
    result = simulate(_disagg_cfg(decode_replicas=2), ClosedLoop(pool, concurrency=3, think_time_s=STEP_S),
                      cost=ConstantCost())
    frame = requests_frame(result)
    assert (frame["status"] == "FINISHED").all()
    # 3 clients: the k-th send (k >= 3) follows the (k-3)-th completion by at least the think time
    arrival, finish = np.sort(frame["arrival_s"].to_numpy()), np.sort(frame["finish_s"].to_numpy())
    assert (arrival[3:] >= finish[:-3] + STEP_S - 1e-12).all()
    assert (frame["replica"] >= 1).all()
    assert result.disagg.coordinator.n_transfers == 12


def test_disagg_command_prints_the_comparison_as_json():
    import json

    result = CliRunner().invoke(app, ["disagg", "--trace", "splitwise_conv", "--max-requests", "40", "--ratios",
                                      "1:1,2:1", "--load", "2", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["rows"]
    assert [r["layout"] for r in rows] == ["aggregated x2", "1P:1D", "aggregated x3", "2P:1D"]
    assert all(r["finished"] == 40 for r in rows)


@pytest.mark.parametrize("args", [["--ratios", "1:0"], ["--ratios", "2"], ["--ratios", "a:b"], ["--load", "0"],
                                  ["--max-requests", "0"], ["--policy", "static"]])
def test_disagg_command_bad_input(args):
    result = CliRunner().invoke(app, ["disagg", "--max-requests", "5", *args])
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


def test_a_decode_replica_recomputing_short_of_blocks_does_not_wait_on_queued_transfers():
    """A decode replica whose running requests all recompute their prompt (after preemption) with no
    block free, and a transfer queued for its blocks: the queued transfer cannot land before blocks
    free up, so it must not count as something to wait for (the run stalled with 51 requests left)."""
    workload = load_run_workload("splitwise_conv", rate_scale=6, max_requests=150)
    cfg = EngineConfig(policy="chunked", num_gpu_blocks_override=60, block_size=8, seed=16, chunk_size=32,
                       prefill_replicas=1, decode_replicas=1)
    result = simulate(cfg, workload)  # raised "the simulation stalled" before
    frame = requests_frame(result)
    rejected = frame["status"] == "REJECTED"
    assert set(frame["status"]) == {"FINISHED", "REJECTED"}
    assert frame.loc[rejected, "reject_reason"].str.contains("the cache holds 60").all()  # too long for 480 tokens
    assert (~rejected).sum() > 50 and result.recorder.preemptions > 0
