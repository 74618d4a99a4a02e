"""`plan --disagg`: the recommendation against disaggregated P:D layouts, under the same SLOs and cost.

The workload is the hand-made bursty trace of test_plan_verify (400 requests, 1000 prompt / 100 output
tokens, a 12 req/s burst) on llama-3-8b, h100-sxm TP1 chunked: each whole-workload run takes well under a second."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_plan_verify import BASE, TARGET_QPS, bursty_trace
from test_plan_verify import SLO_P90 as SLO  # P90: verified on 20 lifetimes, the 400 requests unextended
from typer.testing import CliRunner

from sim.cli import app
from sim.inputs.config import EngineConfig
from sim.inputs.hardware import load_hardware
from sim.inputs.workload.transforms import scale_rate
from sim.planner.disagg import compare_layouts, parse_pd_ratios, split_cluster, split_gpus_and_cost
from sim.planner.plan import SearchSettings, make_plan
from sim.planner.verify import judged_run
from sim.run.simulate import simulate
from sim.run.summary import requests_frame

RATIOS = [(1, 1), (1, 2), (2, 1)]
H100_USD_PER_GPU_HOUR = load_hardware("h100-sxm").cost_per_hour_usd


def plan_with_splits(trace, ratios=RATIOS):
    return make_plan(trace, BASE, ["h100-sxm"], [1], ["chunked"], SLO, TARGET_QPS, SearchSettings(max_requests=100),
                     1, pd_ratios=ratios)


@pytest.fixture(scope="module")
def trace():
    return bursty_trace()


@pytest.fixture(scope="module")
def result(trace):
    return plan_with_splits(trace)


def in_process(fn, tasks):
    return [fn(*task) for task in tasks]


def test_parse_pd_ratios():
    assert parse_pd_ratios("1:1, 1:2,2 : 1,1:1") == [(1, 1), (1, 2), (2, 1)]
    assert parse_pd_ratios("3:5") == [(3, 5)]


def test_gpus_and_cost_add_up_per_group():
    """Prefill on A100 TP1, decode on H100 TP2: GPUs and $/hour summed per group from the profiles."""
    cfg = EngineConfig(model="llama-3-8b", hardware="h100-sxm", prefill={"hardware": "a100-80g-sxm"},
                       decode={"tp": 2})
    gpus, cost = split_gpus_and_cost(cfg, 2, 3)
    assert gpus == 2 * 1 + 3 * 2
    assert cost == pytest.approx(2 * load_hardware("a100-80g-sxm").cost_per_hour_usd + 6 * H100_USD_PER_GPU_HOUR)


def test_each_split_is_costed_and_its_k_is_the_smallest_passing(result):
    section = result["disaggregated"]
    assert section["compared"] and [s["ratio"] for s in section["splits"]] == ["1P:1D", "1P:2D", "2P:1D"]
    seen_pass = seen_fail = False
    for split in section["splits"]:
        p, d = split["prefill_per_unit"], split["decode_per_unit"]
        for run in split["runs"]:
            assert (run["prefill_replicas"], run["decode_replicas"]) == (run["k"] * p, run["k"] * d)
            assert run["gpus"] == run["k"] * (p + d)  # TP 1 in both groups
            assert run["cost_per_hour_usd"] == pytest.approx(run["gpus"] * H100_USD_PER_GPU_HOUR)
            assert run["n_requests"] == 400  # the whole workload
            for key, verdict in run["slo"].items():  # pass/fail per SLO is the limit's
                assert verdict["met"] == (verdict["value_s"] is not None and verdict["value_s"] <= verdict["limit_s"])
                assert run["attainment"][key] == verdict["attainment"]
            bounded = all(run["upper_s"][key] <= v["limit_s"] for key, v in run["slo"].items())
            assert run["passes"] == (all(v["met"] for v in run["slo"].values()) and bounded
                                     and run["finished_share"] >= SLO.goodput_min
                                     and run["steady_state"]["long_enough"] and run["steady_state"]["kept_up"])
            seen_pass, seen_fail = seen_pass or run["passes"], seen_fail or not run["passes"]
        ks = [run["k"] for run in split["runs"]]
        assert len(ks) == len(set(ks))
        assert split["verified"]
        chosen = next(run for run in split["runs"] if run["k"] == split["k"])
        assert chosen["passes"] and split["gpus"] == chosen["gpus"]
        assert split["k"] == 1 or any(r["k"] == split["k"] - 1 and not r["passes"] for r in split["runs"])
        assert split["cost_vs_aggregated_usd"] == pytest.approx(split["cost_per_hour_usd"]
                                                                - section["aggregated"]["cost_per_hour_usd"])
    assert seen_pass and seen_fail  # the search crossed the SLO boundary somewhere


def test_aggregated_row_is_the_recommendation_and_the_cheapest_is_named(result):
    section, best = result["disaggregated"], result["recommended"]
    aggregated = section["aggregated"]
    assert (aggregated["gpus"], aggregated["cost_per_hour_usd"]) == (best["gpus"], best["cost_per_hour_usd"])
    assert aggregated["attainment"] == best["verified_run"]["attainment"]
    assert (section["hardware"], section["tp"], section["policy"]) == (best["hardware"], best["tp"], best["policy"])
    costs = {"aggregated": aggregated["cost_per_hour_usd"],
             **{s["ratio"]: s["cost_per_hour_usd"] for s in section["splits"] if s["verified"]}}
    cheapest = min(costs.values())
    assert costs[section["cheapest"]] == cheapest
    if costs["aggregated"] == cheapest:
        assert section["cheapest"] == "aggregated" and section["verdict"].startswith("aggregated is cheapest")
    else:
        assert section["verdict"].startswith(section["cheapest"])


def test_a_split_run_matches_a_direct_simulation(trace, result):
    """The judge is the aggregated verification's: one passing split run (never stopped early)
    recomputed by hand."""
    run = next(run for split in result["disaggregated"]["splits"] for run in split["runs"] if run["passes"])
    assert run["stopped_early"] is None
    cfg = EngineConfig.model_validate({**BASE.model_dump(), "policy": "chunked"})
    frame = requests_frame(simulate(split_cluster(cfg, run["prefill_replicas"], run["decode_replicas"]),
                                    scale_rate(trace, target_qps=TARGET_QPS)))
    ttft_s = frame.loc[frame["status"] == "FINISHED", "ttft_s"].dropna().to_numpy()
    assert run["p99_s"]["ttft"] == pytest.approx(float(np.quantile(ttft_s, 0.99)))
    p90_s = float(np.quantile(ttft_s, 0.90))
    assert run["slo"]["ttft_p90"]["met"] == (p90_s <= 0.5)
    assert run["attainment"]["ttft_p90"] == pytest.approx(np.sum(ttft_s <= 0.5) / len(frame))


def test_a_failing_split_run_stops_early_with_the_full_runs_verdict(trace, result):
    """1P:1D at k=1 misses the TTFT SLO: its run stopped once that was certain, as the full run agrees."""
    first = result["disaggregated"]["splits"][0]["runs"][0]
    cfg = EngineConfig.model_validate({**BASE.model_dump(), "policy": "chunked"})
    full = judged_run(split_cluster(cfg, 1, 1), trace, TARGET_QPS, SLO)
    assert first["k"] == 1 and not first["passes"] and not full["passes"] and full["stopped_early"] is None
    stop = first["stopped_early"]
    assert stop is not None and stop["at_s"] < full["sim_duration_s"]
    assert 0 < stop["n_judged"] < full["n_requests"] == first["n_requests"]


def test_a_ratio_that_never_passes_within_its_runs_is_reported_failing(trace, result):
    """One run allowed, started at k=1 where 1P:1D misses the TTFT SLO (seen in the module's plan)."""
    first = result["disaggregated"]["splits"][0]["runs"][0]
    assert first["k"] == 1 and not first["passes"]
    cfg = EngineConfig.model_validate({**BASE.model_dump(), "policy": "chunked"})
    section = compare_layouts(result["recommended"], cfg, [(1, 1)], trace, TARGET_QPS, SLO, 1, in_process)
    split = section["splits"][0]
    assert not split["verified"] and split["k"] == 1 and len(split["runs"]) == 1
    assert split["runs"][0] == first  # same run, same record
    assert section["cheapest"] == "aggregated" and "1P:1D met the SLOs at no k tried" in section["verdict"]


def test_layouts_not_compared_say_why(trace, result):
    static = EngineConfig(model="llama-3-8b", policy="static")
    section = compare_layouts(result["recommended"], static, [(1, 1)], trace, TARGET_QPS, SLO, 2, in_process)
    assert not section["compared"] and "static" in section["reason"]


def test_same_answer_on_a_rerun(trace, result):
    again = plan_with_splits(trace)
    assert again["disaggregated"] == result["disaggregated"]


runner = CliRunner()


@pytest.fixture(scope="module")
def trace_csv(tmp_path_factory, trace):
    path = tmp_path_factory.mktemp("plan_disagg") / "bursty.csv"
    columns = zip(trace.arrival_s, trace.prompt_tokens, trace.output_tokens, strict=True)
    rows = "".join(f"{float(a)!r},{int(p)},{int(o)}\n" for a, p, o in columns)
    path.write_text("arrival_s,prompt_tokens,output_tokens\n" + rows)
    return path


def cli_args(trace_csv, *extra):
    return ["plan", "--workload", str(trace_csv), "--model", "llama-3-8b", "--max-requests", "100", "--hardware",
            "h100-sxm", "--tp", "1", "--policy", "chunked", "--target-qps", str(TARGET_QPS), "--slo", "ttft_p99=0.5s",
            "--slo", "tpot_p99=50ms", "--workers", "1", *extra]


@pytest.mark.parametrize("ratios", ["0:1", "1:0", "-1:2", "1:-2", "a:b", "1", "1:2:3", "", "1:1,,2:1", "1.5:1"])
def test_bad_ratios_are_one_line_exit_2(trace_csv, ratios):
    result = runner.invoke(app, cli_args(trace_csv, "--disagg", ratios))
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--disagg" in lines[0] and "P:D" in lines[0], result.stderr


def test_disagg_without_verification_is_one_line_exit_2(trace_csv):
    result = runner.invoke(app, cli_args(trace_csv, "--disagg", "1:1", "--no-verify"))
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--disagg" in lines[0] and "--no-verify" in lines[0]


def test_cli_prints_and_writes_the_comparison(trace_csv, tmp_path, result):
    out = tmp_path / "plan"
    printed = runner.invoke(app, cli_args(trace_csv, "--disagg", "1:1,1:2,2:1", "--out", str(out)))
    assert printed.exit_code == 0, printed.output
    assert "aggregated vs disaggregated" in printed.output and "1P:2D" in printed.output
    assert f"disaggregated: {result['disaggregated']['verdict']}" in printed.output.replace("\n", " ")
    written = json.loads((out / "plan.json").read_text())["disaggregated"]
    assert written["cheapest"] == result["disaggregated"]["cheapest"]
    assert [s["gpus"] for s in written["splits"]] == [s["gpus"] for s in result["disaggregated"]["splits"]]


def canned_run(cfg, task, k, passes):
    gpus, cost = split_gpus_and_cost(cfg, k * task.n_prefill, k * task.n_decode)
    return {"k": k, "prefill_replicas": k * task.n_prefill, "decode_replicas": k * task.n_decode, "gpus": gpus,
            "cost_per_hour_usd": cost, "passes": passes, "attainment": {"ttft_p99": 1.0 if passes else 0.5},
            "within_all_slos": 1.0 if passes else 0.5, "p99_ms": {"ttft": 1.0, "tpot": 1.0, "e2e": 1.0}}


@pytest.mark.parametrize(("passing", "cheapest", "verdict"), [
    ({"2P:1D": 1}, "aggregated", "aggregated is cheapest ($8.07/hour; 2P:1D cost the same); 1P:1D met the SLOs"),
    ({"2P:1D": 1, "1P:1D": 1}, "1P:1D", "1P:1D x1 is cheapest: $5.38/hour, $2.69/hour less than aggregated"),
    ({"1P:1D": 2}, "aggregated", "aggregated is cheapest ($8.07/hour); 2P:1D met the SLOs at no k tried"),
])
def test_the_cheapest_layout_by_hand(passing, cheapest, verdict):
    """3 aggregated H100s ($8.07/h at $2.69) vs canned runs of 2P:1D and 1P:1D: the costs sum per group
    (2 + 1 GPUs in another order than 3 x 1: a tie still goes to aggregated)."""
    assert H100_USD_PER_GPU_HOUR == 2.69  # the profile's price the verdicts below are written in
    cfg = EngineConfig(model="llama-3-8b", policy="chunked")
    recommended = {"replicas": 3, "gpus": 3, "cost_per_hour_usd": 3 * H100_USD_PER_GPU_HOUR,
                   "verified_run": {"passes": True, "attainment": {"ttft_p99": 1.0}, "within_all_slos": 1.0,
                                    "p99_ms": {"ttft": 1.0, "tpot": 1.0, "e2e": 1.0}}}
    starts = {}

    def fake_run_tasks(fn, task_args):
        runs = []
        for task, *_ in task_args:
            starts[task.label] = task.first_k
            k_pass = passing.get(task.label)
            runs.append([canned_run(cfg, task, k, k_pass is not None and k >= k_pass)
                         for k in range(1, (k_pass or 2) + 1)])
        return runs

    section = compare_layouts(recommended, cfg, [(2, 1), (1, 1)], None, TARGET_QPS, SLO, 4, fake_run_tasks)
    assert starts == {"2P:1D": 1, "1P:1D": 2}  # about as many replicas as the aggregated 3
    assert section["cheapest"] == cheapest and section["verdict"].startswith(verdict)
    rows = {row["ratio"]: row for row in section["splits"]}
    for label, row in rows.items():
        assert row["verified"] == (label in passing)
        assert row["k"] == passing.get(label, 2)  # the smallest passing k, else the largest tried
        assert row["gpus"] == row["k"] * {"2P:1D": 3, "1P:1D": 2}[label]
        assert row["cost_per_hour_usd"] == pytest.approx(row["gpus"] * 2.69)

