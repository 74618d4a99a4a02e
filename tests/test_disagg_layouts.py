"""Disaggregated groups with their own EP / DP-attention layouts (issue 24): a decode group of DP
ranks holds one KV pool per rank and steps its ranks in lockstep, its MoE layers priced with
all-to-alls; DeepEP `auto` resolves per role as SGLang's does; GPUs, placement and $/hour follow each
group's layout; the KV link pairs attention ranks; what stays unmodelled is refused in one line."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.engine.disagg.build import group_config
from sim.engine.lockstep import LockstepRank
from sim.errors import InputError
from sim.inputs.config import EngineConfig
from sim.inputs.hardware import load_hardware
from sim.inputs.layout.checks import simulated_layout
from sim.inputs.layout.layout_memory import plan_layout_memory
from sim.inputs.model import load_model
from sim.run.invoke import load_run_workload
from sim.run.simulate import simulate
from sim.run.summary import summarize

MOE = "qwen3-30b-a3b"
DP4_EP4 = {"dp": 4, "enable_expert_parallel": True}  # vLLM's spelling: 4 attention ranks of TP1, EP over 4 GPUs


def _cfg(decode: dict, prefill: dict | None = None, **knobs) -> EngineConfig:
    return EngineConfig.model_validate({"model": MOE, "policy": "chunked", "prefill_replicas": 1,
                                        "decode_replicas": 1, "prefill": prefill or {}, "decode": decode, **knobs})


@pytest.fixture(scope="module")
def workload():
    return load_run_workload("splitwise_conv", max_requests=120, qps=3.0, seed=0)


@pytest.fixture(scope="module")
def runs(workload):
    """The same 5 GPUs two ways: decode TP4 (one KV pool) and decode DP4 x TP1 EP4 (four)."""
    out = {}
    for name, decode in (("tp4", {"tp": 4}), ("dp4", DP4_EP4)):
        result = simulate(_cfg(decode), workload)
        out[name] = (result, summarize(result))
    return out


def test_an_ep_dp_decode_group_runs_one_kv_pool_per_rank(runs):
    (tp_result, tp), (dp_result, dp) = runs["tp4"], runs["dp4"]
    assert tp["n_finished"] == dp["n_finished"] == 120
    assert len(tp_result.num_gpu_blocks_per_replica) == 2  # prefill + one decode replica
    assert len(dp_result.num_gpu_blocks_per_replica) == 1 + 4  # prefill + four decode ranks
    model, hw = load_model(MOE), load_hardware("h100-sxm")
    decode_cfg = group_config(_cfg(DP4_EP4), "decode")
    rank = plan_layout_memory(model, hw, simulated_layout(decode_cfg, model), decode_cfg.block_size,
                              decode_cfg.gpu_memory_utilization, decode_cfg.weight_dtype, decode_cfg.kv_dtype,
                              decode_cfg.max_num_batched_tokens, decode_cfg.max_num_seqs)
    assert dp_result.num_gpu_blocks_per_replica[1:] == [rank.num_gpu_blocks] * 4
    # one rank's pool (TP1, all its KV heads on one GPU) is smaller than the TP4 replica's one pool
    assert rank.num_gpu_blocks < tp_result.num_gpu_blocks_per_replica[1]
    assert all(isinstance(r, LockstepRank) for r in dp_result.disagg.decode)
    served = {int(r) for r in dp_result.table.replica[: dp_result.table.n_requests]}
    assert served <= {1, 2, 3, 4} and len(served) == 4  # every decode rank took requests


def test_the_ep_decode_step_has_all_to_alls_and_plain_tp_has_none(runs):
    decode_ops = {}
    for name in ("tp4", "dp4"):
        cost = runs[name][0].disagg.decode[0].sched.cost
        decode_ops[name] = {op.name for op in cost.breakdown([1] * 32, [1000] * 32).ops}
    assert {"moe_dispatch", "moe_combine"} <= decode_ops["dp4"]
    assert not {"moe_dispatch", "moe_combine"} & decode_ops["tp4"]
    # the layouts differ, so do the decode steps (same GPUs, same load)
    assert runs["tp4"][1]["tpot_s"]["p50"] != runs["dp4"][1]["tpot_s"]["p50"]


def test_gpus_placement_and_cost_follow_each_groups_layout(runs):
    summary = runs["dp4"][1]
    disagg, placement = summary["disaggregation"], summary["placement"]
    assert disagg["n_gpus"] == 5 and disagg["decode_gpus"] == 4 and disagg["prefill_gpus"] == 1
    assert disagg["decode_layout"]["n_kv_ranks"] == 4 and disagg["decode_layout"]["ep"] == 4
    price = load_hardware("h100-sxm").cost_per_hour_usd
    assert disagg["cost_per_hour_usd"] == pytest.approx(5 * price)
    assert [r["n_gpus"] for r in placement["replicas"]] == [1, 4]
    assert placement["group_layouts"]["decode"]["dp"] == 4
    assert disagg["link_parallel_pairs"] == 1  # a TP1 rank sends to a TP1 rank: one GPU pair


def test_a_run_with_ep_groups_is_deterministic(runs, workload):
    again = summarize(simulate(_cfg(DP4_EP4), workload))
    first = runs["dp4"][1]
    for key in ("ttft_s", "tpot_s", "e2e_s", "disaggregation"):
        assert again[key] == first[key]


def test_deepep_auto_runs_normal_kernels_on_prefill_and_low_latency_on_decode():
    cfg = _cfg(DP4_EP4, prefill=DP4_EP4, moe_a2a_backend="deepep")
    assert group_config(cfg, "prefill").deepep_mode == "normal"
    assert group_config(cfg, "decode").deepep_mode == "low_latency"
    pinned = _cfg({**DP4_EP4, "deepep_mode": "normal"}, moe_a2a_backend="deepep")
    assert group_config(pinned, "decode").deepep_mode == "normal"  # a group's own mode is kept


def test_sglang_spelling_and_engine_keys_in_a_group():
    cfg = _cfg({"tp": 4, "data_parallel_size": 4, "enable_dp_attention": True, "ep_size": 4})
    layout = simulated_layout(group_config(cfg, "decode"), load_model(MOE))
    assert (layout.n_gpus, layout.n_kv_ranks, layout.attention_tp, layout.expert_parallel_size) == (4, 4, 1, 4)


@pytest.mark.parametrize("decode, knobs, words", [
    ({"tp": 2, "pp": 2}, {}, "pipeline stages with disaggregated"),
    ({**DP4_EP4, "pp": 2}, {}, "pipeline stages with disaggregated"),
    (DP4_EP4, {"spec_tokens": 2}, "speculative decoding"),
    ({"dp": 4}, {}, "--enable-expert-parallel"),
])
def test_what_is_not_modelled_is_refused_in_one_line(decode, knobs, words, workload):
    with pytest.raises(InputError, match=words):
        simulate(_cfg(decode, **knobs), workload)


def test_cli_group_layout_flags(tmp_path):
    args = ["simulate", "--model", MOE, "--policy", "chunked", "--qps", "3", "--max-requests", "30",
            "--prefill-replicas", "1", "--decode-replicas", "1", "--decode-dp", "4", "--decode-enable-expert-parallel",
            "--decode-moe-a2a-backend", "deepep", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert '"moe_a2a": "deepep low_latency"' in result.output
    for bad in (["--decode-dp", "3"],  # EP3 does not divide 128 experts
                ["--decode-dp", "8", "--nodes", "1"]):  # 1 + 8 GPUs need two 8-GPU nodes
        result = CliRunner().invoke(app, [*args[:-1], *bad])
        assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output


def test_ep_groups_decode_runs_equal_single_steps(workload, monkeypatch):
    """Decode runs stop where a transfer could land (the prefill ranks' group step, as re-timed by
    their lockstep group), so they equal single steps."""
    from test_engine_decode_runs import assert_frames_match, assert_summaries_match, run_both

    cfg = _cfg(DP4_EP4, prefill={"dp": 2, "enable_expert_parallel": True}, prefill_replicas=2)
    (frame, summary, _, n_commits), (frame_1, summary_1, _, _) = run_both(cfg, workload, monkeypatch)
    assert n_commits < 0.7 * summary["n_steps"]  # decode runs really ran
    assert_frames_match(frame, frame_1)
    assert summary.pop("disaggregation") == summary_1.pop("disaggregation")
    assert_summaries_match(summary, summary_1)


def _screened(base: EngineConfig):
    from test_plan_layouts import small_trace

    from sim.planner.candidates import build_candidates
    from sim.planner.layouts import LayoutGrid
    from sim.planner.screen import screen
    from sim.planner.slo import parse_slo

    grid = LayoutGrid(pps=(1, 2), expert_parallel=(False, True), dps=(1, 2, 4))
    candidates, _ = build_candidates(base, ["h100-sxm"], [1, 2, 4], ["chunked"], layouts=grid)
    return screen(candidates, small_trace(), parse_slo(["ttft_p99=2s", "tpot_p99=20ms"]), 12.0, None)[3]


def _usd_per_tok_s(candidate, rate: float) -> float:
    return candidate.n_gpus * candidate.cost_per_gpu_hour_usd / rate if rate > 0 else float("inf")


def test_the_planner_lets_ep_layouts_compete_per_group():
    from sim.planner.disagg_layouts import choose_groups, split_base

    estimates = _screened(EngineConfig(model=MOE, policy="chunked"))
    groups = choose_groups("h100-sxm", "chunked", estimates)
    no_pp = [(c, e) for c, e in estimates if c.cfg.pp == 1]
    assert any(c.cfg.layout().uses_expert_parallel for c, _ in no_pp)  # EP layouts are in the running
    assert any(c.cfg.pp > 1 for c, _ in estimates)  # PP ones were priced but may not run disaggregated
    best_decode = min(_usd_per_tok_s(c, e.decode_tok_s) for c, e in no_pp)
    best_prefill = min(_usd_per_tok_s(c, e.prefill_tok_s) for c, e in no_pp if e.prefill_within_ttft)
    (prefill, prefill_e), (decode, decode_e) = groups["prefill"], groups["decode"]
    assert _usd_per_tok_s(decode, decode_e.decode_tok_s) == best_decode
    assert _usd_per_tok_s(prefill, prefill_e.prefill_tok_s) == best_prefill
    assert prefill.cfg.pp == decode.cfg.pp == 1
    base = split_base(groups)  # each group carries its own candidate's layout
    for role, chosen in (("prefill", prefill), ("decode", decode)):
        assert group_config(base, role).layout() == chosen.cfg.layout()



def test_disagg_command_takes_group_layout_flags():
    import json

    result = CliRunner().invoke(app, ["disagg", "--model", MOE, "--ratios", "1:1", "--max-requests", "40",
                                      "--decode-dp", "4", "--decode-enable-expert-parallel", "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["layout"]: row for row in json.loads(result.output)["rows"]}
    assert rows["aggregated x2"]["gpus"] == 2 and rows["1P:1D"]["gpus"] == 1 + 4  # the decode replica's 4 GPUs
    assert rows["1P:1D"]["finished"] == 40
