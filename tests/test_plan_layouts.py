"""The planner's layout search (issue 24 item 4): valid TP x PP x EP x DP-attention candidates, the
screen (an estimate that never claims to be a bound), prefill and decode groups chosen apart under
--disagg, GPUs and whole nodes per layout, and launch lines carrying the layout for vLLM and SGLang."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sim.errors import InputError
from sim.inputs.config import EngineConfig
from sim.inputs.hardware import load_hardware
from sim.inputs.layout.checks import simulated_layout
from sim.inputs.model import load_model
from sim.inputs.slo import parse_slo
from sim.inputs.workload.trace import Trace
from sim.planner.candidates import build_candidates
from sim.planner.launch import launch_command
from sim.planner.layouts import LayoutGrid, parse_layout_grid, whole_nodes
from sim.planner.plan import SearchSettings, make_plan
from sim.planner.screen import is_plain_tp, screen

GRID = LayoutGrid(pps=(1, 2), expert_parallel=(False, True), dps=(1, 2, 4, 8), a2a_backends=("nccl", "deepep"))
SLO = parse_slo(["ttft_p99=2s", "tpot_p99=50ms"])


def small_trace(n: int = 160, seed: int = 3) -> Trace:
    rng = np.random.default_rng(seed)
    return Trace(np.cumsum(rng.exponential(0.1, n)), rng.integers(1500, 3000, n), rng.integers(60, 160, n),
                 source="small")


def deepseek_candidates():
    base = EngineConfig(model="deepseek-r1", weight_dtype="fp8", policy="chunked")
    return build_candidates(base, ["h200", "gb200-nvl72"], [1, 2, 4, 8, 16], ["chunked"],
                            prices={"gb200-nvl72": 10.0}, layouts=GRID)


def test_deepseek_candidates_are_valid_and_include_ep_and_dp_attention():
    candidates, skipped = deepseek_candidates()
    model = load_model("deepseek-r1")
    kinds = set()
    for c in candidates:
        layout = simulated_layout(c.cfg, model)  # the simulator's own check: raises if invalid
        assert c.n_gpus == layout.n_gpus <= GRID.max_replica_gpus
        assert model.n_heads % layout.attention_tp == 0
        if layout.uses_expert_parallel:
            assert model.n_experts % layout.expert_parallel_size == 0 and layout.pp == 1
            assert layout.expert_parallel_size == layout.moe_group  # EP over the whole MoE group
        kinds.add("ep" if layout.uses_expert_parallel and layout.dp == 1 else
                  "dp-attention" if layout.dp > 1 else "pp" if layout.pp > 1 else "tp")
    assert kinds == {"tp", "pp", "ep", "dp-attention"}
    labels = {(c.cfg.hardware, c.label) for c in candidates}
    assert ("h200", "h200 dp8 x tp1 ep8 chunked") in labels
    assert ("h200", "h200 tp16 chunked") in labels  # TP over two 8-GPU nodes
    assert ("gb200-nvl72", "gb200-nvl72 dp8 x tp8 ep64 chunked") in labels  # inside the NVL72 domain
    assert not any(c.cfg.tp == 1 and c.n_gpus == 1 for c in candidates)  # 671B of fp8 does not fit one GPU
    assert any("does not fit" in s.reason for s in skipped)


def test_a_dense_model_gets_no_expert_layouts():
    base = EngineConfig(model="llama-3-8b", policy="chunked")
    candidates, skipped = build_candidates(base, ["h100-sxm"], [1, 2], ["chunked"], layouts=GRID)
    assert all(c.cfg.layout().is_dense_tp_pp for c in candidates) and candidates
    assert any("dense model has no experts" in s.reason for s in skipped)


def test_screen_drops_per_hardware_and_says_it_is_no_bound():
    candidates, _ = deepseek_candidates()
    kept, unpriced, section, estimates = screen(candidates, small_trace(), SLO, 20.0, 2)
    assert section["kind"].endswith("(not a bound)") and section["exact_over"] == "sized candidates only"
    assert {c.cfg.hardware for c in kept} == {"h200", "gb200-nvl72"}
    for hw in ("h200", "gb200-nvl72"):  # per hardware: the 2 lowest estimates, and plain TP whatever its estimate
        def order(i):  # the screen's: estimated $/h, then GPU-hours, then candidate order
            c, e = estimates[i]
            return e.cost_per_hour_usd, 20.0 / e.replica_qps * c.n_gpus if e.replica_qps > 0 else math.inf, i

        mine = sorted((order(i), i) for i, (c, e) in enumerate(estimates) if c.cfg.hardware == hw)
        plain = [i for i, (c, _) in enumerate(estimates) if c.cfg.hardware == hw and is_plain_tp(c)]
        best_plain = min(plain, key=order)
        in_node = {i for i in plain if estimates[i][0].n_gpus <= estimates[i][0].gpus_per_node}
        expected = {i for _, i in mine[:2]} | in_node | {best_plain}
        assert {id(c) for c in kept if c.cfg.hardware == hw} == {id(estimates[i][0]) for i in expected}
    assert section["n_dropped"] == len(estimates) - len(kept) > 0
    dropped = [r for r in section["estimates"] if not r["sized"]]
    assert section["best_dropped"]["cost_per_hour_usd"] == min(r["cost_per_hour_usd"] for r in dropped)
    assert any("no fit for EP" in s.reason for s in unpriced)  # DeepEP sizes a profile has no fit for
    kept_all, _, all_section, _ = screen(candidates, small_trace(), SLO, 20.0, None)
    assert all_section["exact_over"] == "every candidate" and len(kept_all) == len(estimates)


def test_whole_nodes_follow_the_layout():
    assert whole_nodes(3, 16, 8) == 6  # a TP16 / DP2xTP8 replica takes two 8-GPU nodes
    assert whole_nodes(3, 2, 8) == 1 and whole_nodes(5, 2, 8) == 2  # small replicas share a node
    assert whole_nodes(1, 8, 4) == 2  # 8 GPUs on GB200 compute trays of 4


def test_launch_lines_carry_the_layout_for_both_engines():
    base = EngineConfig(model="deepseek-r1", weight_dtype="fp8", hardware="h200", policy="chunked")
    dp = base.model_copy(update={"tp": 2, "dp": 8, "enable_expert_parallel": True, "moe_a2a_backend": "deepep"})
    lines = launch_command(dp, 3)["layout_lines"]
    vllm, sglang = lines["vllm"]["command"].split(), lines["sglang"]["command"].split()
    assert vllm[vllm.index("--tensor-parallel-size") + 1] == "2" and vllm[vllm.index("--data-parallel-size") + 1] == "8"
    assert "--enable-expert-parallel" in vllm
    assert any("no --all2all-backend" in gap for gap in lines["vllm"]["not_expressible"])  # deepep auto
    assert "this line runs vLLM's default --all2all-backend" in lines["vllm"]["simulated"]
    assert any("2 nodes" in gap for gap in lines["vllm"]["not_expressible"])
    for flag, value in (("--tp-size", "16"), ("--dp-size", "8"), ("--ep-size", "16"), ("--moe-a2a-backend", "deepep"),
                        ("--nnodes", "2")):
        assert sglang[sglang.index(flag) + 1] == value, flag
    assert "--enable-dp-attention" in sglang
    pp = base.model_copy(update={"tp": 8, "pp": 2})
    pp_lines = launch_command(pp, 1)["layout_lines"]
    assert "--pipeline-parallel-size 2" in pp_lines["vllm"]["command"]
    assert "--pp-size 2" in pp_lines["sglang"]["command"]
    assert "--enable-dp-attention" not in pp_lines["sglang"]["command"]
    plain = launch_command(base.model_copy(update={"tp": 8}), 1)["layout_lines"]
    assert "--ep-size" not in plain["sglang"]["command"] and "--enable-expert-parallel" not in plain["vllm"]["command"]
    assert plain["vllm"]["not_expressible"] == [] and "--nnodes" not in plain["sglang"]["command"]


def test_layout_flags_are_parsed_or_refused():
    assert parse_layout_grid(None, None, None, None, None) is None
    grid = parse_layout_grid("1,2", None, "1,8", "nccl,deepep", 32)
    assert grid.expert_parallel == (False, True) and grid.dps == (1, 8) and grid.max_replica_gpus == 32
    for args, flag in ((("0", None, None, None, None), "--pp"), ((None, "maybe", None, None, None), "--ep"),
                       ((None, None, None, "mpi", None), "--moe-a2a-backend")):
        with pytest.raises(InputError) as error:
            parse_layout_grid(*args)
        assert error.value.where == flag


@pytest.fixture(scope="module")
def moe_plan():
    """qwen3-30b-a3b on H100 over TP x EP x DP layouts, verified, with a 1:1 P:D comparison."""
    grid = LayoutGrid(expert_parallel=(False, True), dps=(1, 2))
    return make_plan(small_trace(), EngineConfig(model="qwen3-30b-a3b", policy="chunked"), ["h100-sxm"], [1, 2, 4],
                     ["chunked"], parse_slo(["ttft_p99=2s", "tpot_p99=20ms"]), 12.0,
                     SearchSettings(max_requests=80, max_verify_runs=3, screen_keep=3), 1, layouts=grid,
                     pd_ratios=[(1, 1)])


def test_plan_rows_count_gpus_and_whole_nodes_by_layout(moe_plan):
    per_node = load_hardware("h100-sxm").interconnect.max_gpus_per_node
    sized = {r["candidate"] for r in moe_plan["screen"]["estimates"] if r["sized"]}
    assert {"h100-sxm tp1 chunked", "h100-sxm tp2 chunked", "h100-sxm tp4 chunked"} <= sized  # plain TP: always
    assert moe_plan["screen"]["n_sized"] == len(sized) <= 3 + 3 and moe_plan["layouts"]["dp"] == [1, 2]
    for row in moe_plan["candidates"]:
        assert row["gpus"] == row["replicas"] * row["gpus_per_replica"] == row["replicas"] * row["layout"][
            "gpus_per_replica"]
        assert row["nodes"] == whole_nodes(row["replicas"], row["gpus_per_replica"], per_node)
        for run in row.get("verification", []):
            assert run["gpus"] == run["replicas"] * row["gpus_per_replica"]
    assert moe_plan["recommended"]["verified"] and moe_plan["recommended"]["verified_run"]["passes"]


def test_disaggregated_groups_take_their_own_layouts(moe_plan):
    section = moe_plan["disaggregated"]
    assert section["compared"] and section["groups"]["rule"].startswith("per role")
    assert section["prefill_tp"] != section["decode_tp"]  # prefill: the cheapest tok/s; decode: the batch TPOT allows
    assert (section["prefill_tp"], section["decode_tp"]) == (section["groups"]["prefill"]["tp"],
                                                              section["groups"]["decode"]["tp"])
    gpus = {role: section["groups"][role]["gpus_per_replica"] for role in ("prefill", "decode")}
    for split in section["splits"]:
        for run in split["runs"]:  # each group's replicas hold its own layout's GPUs
            assert run["gpus"] == run["prefill_replicas"] * gpus["prefill"] + run["decode_replicas"] * gpus["decode"]


CLI_ARGS = ["plan", "--workload", "splitwise_conv", "--model", "qwen3-30b-a3b", "--hardware", "h100-sxm", "--tp", "1,2",
            "--policy", "chunked", "--max-requests", "60", "--workers", "1", "--no-verify", "--target-qps", "4",
            "--slo", "ttft_p99=2s", "--slo", "tpot_p99=50ms"]


def test_cli_plan_searches_layouts_and_prints_both_engines_lines():
    from typer.testing import CliRunner

    from sim.cli import app

    result = CliRunner().invoke(app, [*CLI_ARGS, "--ep", "off,on", "--dp", "1,2", "--screen-keep", "2", "--json"])
    assert result.exit_code == 0, result.output
    import json

    plan = json.loads(result.output[result.output.index("{"):])
    assert plan["screen"]["keep_per_hardware"] == 2 and plan["screen"]["n_sized"] == 2
    assert plan["layouts"]["expert_parallel"] == [False, True] and plan["layouts"]["dp"] == [1, 2]
    assert set(plan["launch"]["layout_lines"]) == {"vllm", "sglang"}


@pytest.mark.parametrize(("extra", "flag"), [(["--ep", "sometimes"], "--ep"), (["--dp", "0"], "--dp"),
                                             (["--screen-keep", "0"], "--screen-keep")])
def test_cli_bad_layout_flags_are_one_line_exit_2(extra, flag):
    from typer.testing import CliRunner

    from sim.cli import app

    result = CliRunner().invoke(app, [*CLI_ARGS, *extra])
    assert result.exit_code == 2 and "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and flag in lines[0], result.output


def test_k8s_runs_a_replica_that_spans_nodes_as_a_leader_worker_set():
    """Before issue 45 a replica wider than a node was refused (a Deployment pod is one node)."""
    from sim.planner.k8s import manifests

    cfg = EngineConfig(model="deepseek-r1", weight_dtype="fp8", hardware="h200", tp=16, policy="chunked")
    plan = {"recommended": {"tp": 16, "gpus_per_replica": 16, "gpus_per_node": 8, "replicas": 2, "hardware": "h200"},
            "launch": launch_command(cfg, 2), "target_qps": 4.0}
    lws = manifests(plan)[0]
    assert lws["kind"] == "LeaderWorkerSet" and lws["spec"]["leaderWorkerTemplate"]["size"] == 2


def test_more_layouts_never_give_a_dearer_plan_when_nothing_is_screened_out():
    """With the screen keeping every candidate (screen_keep None), adding layouts only adds candidates to
    the bound-then-verify minimum (tests/test_plan_monotone.py's property, over layouts)."""
    def cost(grid: LayoutGrid) -> tuple[float, dict]:
        plan = make_plan(small_trace(120, seed=5), EngineConfig(model="qwen3-30b-a3b", policy="chunked"),
                         ["h100-sxm"], [1, 2], ["chunked"], parse_slo(["ttft_p99=2s", "tpot_p99=20ms"]), 10.0,
                         SearchSettings(max_requests=60, max_verify_runs=3), 1, layouts=grid)
        assert plan["screen"]["n_dropped"] == 0 and plan["verification_order"]["exact"]
        return plan["recommended"]["cost_per_hour_usd"], plan

    tp_only, _ = cost(LayoutGrid())
    with_ep, _ = cost(LayoutGrid(expert_parallel=(False, True)))
    with_dp, plan = cost(LayoutGrid(expert_parallel=(False, True), dps=(1, 2)))
    assert with_dp <= with_ep <= tp_only
    assert len(plan["screen"]["estimates"]) > 2  # the layouts were there to choose from


def test_uncertainty_rebuilds_a_laid_out_recommendation():
    from sim.planner.band import recommended_config

    row = {"hardware": "h200", "tp": 1, "policy": "chunked", "knobs": {"enable_expert_parallel": True, "dp": 8},
           "gpus_per_replica": 8}
    cfg = recommended_config(EngineConfig(model="deepseek-r1", weight_dtype="fp8"), row, layouts=True)
    assert cfg.layout().n_gpus == 8 and cfg.layout().expert_parallel_size == 8 and cfg.dp == 8
