"""The planner sizes for the trace's bursts and verifies the cluster on the whole workload; the knob
search finds the best setting; the same plan whichever backend ran it.

The bursty trace is hand-made: 150 requests at ~1 req/s, 150 at ~12 req/s, 100 at ~1 req/s (constant
lengths), so a replica sized on the first requests (the calm head) cannot carry the burst."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.inputs.config import EngineConfig
from sim.inputs.workload.trace import Trace
from sim.planner.burst import densest_window, search_slice
from sim.planner.knobs import best_per_hardware_tp, pareto_frontier
from sim.planner.launch import vllm_command
from sim.planner.plan import SearchSettings, make_plan
from sim.planner.slo import parse_slo
from sim.planner.verify import verification_run
from sim.run.backends import LocalBackend

SLO = parse_slo(["ttft_p99=0.5s", "tpot_p99=50ms"])
SLO_P90 = parse_slo(["ttft_p90=0.5s", "tpot_p90=50ms"])  # confirmed on 20 request lifetimes, a P99 on 100
BASE = EngineConfig(model="llama-3-8b")
TARGET_QPS = 12.0


def bursty_trace(seed: int = 0) -> Trace:
    rng = np.random.default_rng(seed)
    gaps = np.concatenate([rng.exponential(1 / 1.0, 150), rng.exponential(1 / 12.0, 150),
                           rng.exponential(1 / 1.0, 100)])
    n = len(gaps)
    return Trace(np.cumsum(gaps) - gaps[0], np.full(n, 1000), np.full(n, 100), source="bursty")


@pytest.fixture(scope="module")
def trace() -> Trace:
    return bursty_trace()


def plan(trace, sizing="busiest", knob_grid=None, backend=None, slo=SLO, **settings):
    return make_plan(trace, BASE, ["h100-sxm"], [1], ["chunked"], slo, TARGET_QPS,
                     SearchSettings(max_requests=100, sizing=sizing, **settings), 1, backend=backend,
                     knob_grid=knob_grid)


def test_densest_window_finds_the_burst(trace):
    start, span_s = densest_window(trace.arrival_s, 90)
    assert 150 <= start + 45 < 300  # the middle of the densest 90 requests lies in the burst
    piece = search_slice(trace, 100, 0.1, "busiest")
    assert piece.peak_to_mean > 5 and piece.n_warmup == 10 and len(piece.trace) == 100
    assert search_slice(trace, 100, 0.1, "head").first_request == 0


def test_verification_adds_replicas_when_the_slice_answer_fails():
    """Sized on the calm head, one replica looks enough; the whole workload says otherwise. The head is
    long (600 calm requests) so that even the capacity's confirmation run (sim.run.steady_state
    confirm_lifetimes: 20 for P90 limits, the head slice drawn longer) ends before the burst."""
    rng = np.random.default_rng(0)
    gaps = np.concatenate([rng.exponential(1.0, 600), rng.exponential(1 / 12.0, 150), rng.exponential(1.0, 100)])
    trace = Trace(np.cumsum(gaps) - gaps[0], np.full(len(gaps), 1000), np.full(len(gaps), 100), source="calm head")
    row = plan(trace, sizing="head", slo=SLO_P90)["candidates"][0]
    runs = row["verification"]
    assert row["replicas_estimated"] == runs[0]["replicas"]
    assert not runs[0]["passes"] and runs[-1]["passes"]
    assert [r["replicas"] for r in runs] == list(range(runs[0]["replicas"], runs[0]["replicas"] + len(runs)))
    assert row["verified"] and row["replicas"] == runs[-1]["replicas"] > row["replicas_estimated"]
    failing = runs[-2]
    assert (any(v["value_s"] > v["limit_s"] or failing["upper_s"][key] > v["limit_s"] for key, v in failing["slo"].items())
            or failing["finished_share"] < 0.99)  # a percentile, or its upper confidence bound, over its limit
    assert runs[-1]["n_requests"] == len(trace)  # the whole workload, not a slice


def test_busy_window_sizing_needs_no_more_than_verification_finds(trace):
    """P90 limits: their confirmation runs (20 lifetimes) stay inside the 400-request trace's head."""
    head, busiest = plan(trace, sizing="head", slo=SLO_P90), plan(trace, sizing="busiest", slo=SLO_P90)
    assert busiest["candidates"][0]["replicas_estimated"] > head["candidates"][0]["replicas_estimated"]
    assert busiest["recommended"]["replicas"] == head["recommended"]["replicas"]  # both verified the same
    best = busiest["recommended"]
    assert best["verified_run"]["passes"] and best["verified_run"]["replicas"] == best["replicas"]
    assert busiest["launch"]["replicas"] == best["replicas"]


def test_verification_run_matches_a_direct_simulation(trace):
    from sim.inputs.workload.transforms import scale_rate
    from sim.run.simulate import simulate
    from sim.run.summary import requests_frame

    run = verification_run(BASE, trace, 2, TARGET_QPS, SLO_P90)  # P90: 20 lifetimes, inside the 400 requests
    frame = requests_frame(simulate(BASE.model_copy(update={"replicas": 2}), scale_rate(trace, target_qps=TARGET_QPS)))
    finished = frame[frame["status"] == "FINISHED"]
    assert run["n_requests"] == len(trace)  # not extended: the run the direct simulation is
    assert run["p99_s"]["ttft"] == pytest.approx(finished["ttft_s"].quantile(0.99))
    assert run["attainment"]["ttft_p90"] == pytest.approx((finished["ttft_s"] <= 0.5).sum() / len(frame))
    bounded = all(run["upper_s"][key] <= limit["limit_s"] for key, limit in run["slo"].items())
    steady = run["steady_state"]["long_enough"] and run["steady_state"]["kept_up"]
    assert run["passes"] == (run["slo"]["ttft_p90"]["met"] and run["slo"]["tpot_p90"]["met"]
                             and run["finished_share"] >= 0.99 and bounded and steady)


def test_knob_search_finds_the_best_setting_found_by_separate_searches(trace):
    """The hand-made optimum: one search per max_num_seqs value, each on its own; the knob search must
    pick the value with the highest sustained rate (max_num_seqs=1 serialises decoding: the worst)."""
    values = [1, 4, 64]
    separate = {}
    for value in values:
        base = BASE.model_copy(update={"max_num_seqs": value})
        one = make_plan(trace, base, ["h100-sxm"], [1], ["chunked"], SLO, TARGET_QPS,
                        SearchSettings(max_requests=100, verify=False), 1)
        separate[value] = one["candidates"][0]["max_qps_per_replica"] if one["candidates"] else 0.0
    searched = plan(trace, knob_grid={"max_num_seqs": values}, verify=False)
    best = searched["best_per_hardware_tp"][0]
    expected = max(values, key=lambda v: (separate[v], -values.index(v)))
    assert best["knobs"] == {"max_num_seqs": expected} and best["max_qps_per_replica"] == separate[expected]
    assert separate[1] < separate[expected]
    assert {tuple(r["knobs"].items()) for r in searched["candidates"]} <= {(("max_num_seqs", v),) for v in values}


def test_pareto_frontier_keeps_only_undominated_points():
    points = [{"tok_s_per_gpu": g, "tok_s_per_user": u, "id": i}
              for i, (g, u) in enumerate([(100, 10), (80, 20), (90, 5), (80, 15), (50, 40), (40, 30)])]
    assert [p["id"] for p in pareto_frontier(points)] == [0, 1, 4]


def test_launch_command_uses_vllm_names():
    cfg = EngineConfig(model="llama-3-70b", tp=4, policy="radix", max_num_seqs=128, kv_dtype="fp8")
    command = vllm_command(cfg)
    assert command.startswith("vllm serve meta-llama/Meta-Llama-3-70B --tensor-parallel-size 4 --max-num-seqs 128")
    assert "--enable-prefix-caching" in command and "--kv-cache-dtype fp8" in command


def test_local_and_ray_give_the_same_plan(trace):
    ray = pytest.importorskip("ray")
    from sim.run.backends import RayBackend

    grid = {"max_num_seqs": [4, 64]}
    with LocalBackend(2) as backend:
        local = plan(trace, knob_grid=grid, backend=backend, max_verified=2)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        via_ray = plan(trace, knob_grid=grid, backend=RayBackend(None, 2), max_verified=2)
    finally:
        ray.shutdown()
    assert via_ray == local
    assert local["recommended"]["verified"]


runner = CliRunner()


@pytest.mark.parametrize(("extra", "needle"), [
    (["--search", "temperature=0.1"], "--search"),
    (["--search", "max_num_seqs=0,4"], "max_num_seqs"),
    (["--sizing", "peak"], "--sizing"),
    (["--max-verify-runs", "0"], "--max-verify-runs"),
    (["--backend", "mpi"], "--backend"),
])
def test_plan_bad_input_is_one_line_exit_2(extra, needle):
    args = ["plan", "--workload", "splitwise_conv", "--model", "llama-3-8b", "--max-requests", "40", "--hardware",
            "h100-sxm", "--tp", "1", "--policy", "chunked", "--target-qps", "5", "--slo", "ttft_p99=1s", *extra]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], result.stderr


@pytest.mark.parametrize("threshold", [1, 2, 3, 5, 9])
@pytest.mark.parametrize("estimate", [1, 3, 6])
@pytest.mark.parametrize("guess", [None, 1, 2, 6])
def test_verify_search_finds_the_fewest_passing_replicas(monkeypatch, threshold, estimate, guess):
    """Against an oracle: a cluster passes iff it has >= threshold replicas; each count is run once."""
    import sim.planner.verify as verify

    def fake_run(cfg, trace, replicas, target_qps, slo, time_scale=None, stop_failing=False):
        return {"replicas": replicas, "passes": replicas >= threshold}

    monkeypatch.setattr(verify, "verification_run", fake_run)
    records, _ = verify.verify_candidates([verify.VerifyTask(BASE, estimate, 20, guess)], None, 1.0, SLO,
                                          lambda fn, args: [fn(*a) for a in args])
    runs = [r["replicas"] for r in records[0]]
    assert verify.verified_replicas(records[0]) == threshold
    assert len(runs) == len(set(runs)) <= 4 + abs(threshold - estimate)
    assert threshold - 1 in runs or threshold == 1  # the answer is the fewest: one less was seen failing


@pytest.mark.parametrize(("engine", "start", "flags"), [
    # vLLM V1's default on >= 70 GiB GPUs
    ("vllm", "vllm serve meta-llama/Meta-Llama-3-70B --tensor-parallel-size 4", ("--max-num-seqs 1024",)),
    ("sglang", "python -m sglang.launch_server --model-path meta-llama/Meta-Llama-3-70B --tp-size 4",
     ("--max-running-requests", "--page-size")),
    ("trtllm", "trtllm-serve meta-llama/Meta-Llama-3-70B --tp_size 4", ("--max_batch_size", "--max_num_tokens")),
    ("lmdeploy", "lmdeploy serve api_server meta-llama/Meta-Llama-3-70B --backend turbomind --tp 4",
     ("--max-batch-size",)),
])
def test_launch_command_follows_the_engine_preset(engine, start, flags):
    from sim.planner.launch import launch_command

    launch = launch_command(EngineConfig(model="llama-3-70b", tp=4, engine=engine), 3)
    assert launch["engine"] == engine and launch["replicas"] == 3 and "derived from the simulation" in launch["label"]
    assert launch["command"].startswith(start) and all(flag in launch["command"] for flag in flags)



def test_sglang_launch_takes_the_chunk_size_and_the_step_budget():
    """QA: the SGLang command gave --chunked-prefill-size the step budget (16384) instead of the
    preset's per-request chunk (8192, SGLang's chunked_prefill_size)."""
    from sim.planner.launch import launch_command

    cfg = EngineConfig(model="llama-3-8b", engine="sglang")
    assert (cfg.chunk_size, cfg.max_num_batched_tokens) == (8192, 16384)
    command = launch_command(cfg, 1)["command"]
    assert "--chunked-prefill-size 8192" in command and "--max-prefill-tokens 16384" in command


def test_plan_with_a_radix_preset_also_sizes_its_other_policies():
    """QA: plan --engine sglang --policy chunked,radix failed: the preset's lpm ordering (radix only)
    went into the chunked candidate (sglang@0.4: lpm; 0.5 orders fcfs)."""
    from sim.planner.candidates import build_candidates

    base = EngineConfig(model="llama-3-8b", engine="sglang@0.4")
    runnable, _ = build_candidates(base, ["h100-sxm"], [1], ["continuous", "chunked", "radix"],
                                   [{"max_num_batched_tokens": 4096}])
    by_policy = {c.cfg.policy: c.cfg for c in runnable}
    assert by_policy["radix"].radix_ordering == "lpm" and by_policy["chunked"].radix_ordering == "fcfs"
    assert by_policy["continuous"].chunk_size is None and by_policy["chunked"].chunk_size == 4096


def test_plan_refuses_a_disaggregated_base(tmp_path):
    """QA: a --config with prefill_replicas/decode_replicas was planned as one 1-GPU "replica" (the 3
    GPUs of a 1P:2D cluster priced as one)."""
    from typer.testing import CliRunner

    from sim.cli import app

    path = tmp_path / "pd.yaml"
    path.write_text("prefill_replicas: 1\ndecode_replicas: 2\n")
    result = CliRunner().invoke(app, ["plan", "--model", "llama-3-8b", "--slo", "ttft_p99=1s", "--hardware",
                                      "h100-sxm", "--tp", "1", "--policy", "chunked", "--target-qps", "5",
                                      "--config", str(path), "--max-requests", "50", "--no-verify"])
    assert result.exit_code == 2, result.output
    assert result.output.strip().startswith("error: --config: prefill_replicas/decode_replicas: plan sizes")


def test_equal_cost_candidates_rank_by_headroom():
    """QA: two knob settings needing the same replicas tied on cost and were ordered by the knobs'
    text ('256' before '64'), so the recommendation contradicted the best-knobs table."""
    from sim.planner.rows import row_order

    def row(seqs, qps):
        return {"cost_per_hour_usd": 2.69, "gpus": 1, "hardware": "h100-sxm", "tp": 1, "policy": "chunked",
                "knobs": {"max_num_seqs": seqs}, "max_qps_per_replica": qps}

    rows = sorted([row(256, 8.72), row(64, 9.93)], key=row_order)
    assert [r["knobs"]["max_num_seqs"] for r in rows] == [64, 256]
    assert best_per_hardware_tp(rows)[0]["knobs"] == rows[0]["knobs"]


@pytest.mark.parametrize("thresholds", [[1, 3, 6], [2, 2, 9], [5, 1, 4]])
def test_verifying_in_rounds_keeps_each_searchs_own_runs(thresholds):
    """Several searches spread over rounds (with speculative one-fewer runs) keep exactly the runs and
    order each search makes alone; rounds are fewer than the runs kept."""
    from sim.planner.verify import VerifyTask, fewest_passing, verify_candidates

    tasks = [VerifyTask(EngineConfig(model="llama-3-8b", seed=i), estimate, 6, guess)
             for i, (estimate, guess) in enumerate([(3, 2), (4, None), (2, 5)])]
    threshold_of = {task.cfg.seed: t for task, t in zip(tasks, thresholds, strict=True)}
    rounds = []

    def run_tasks(fn, args):
        rounds.append(len(args))
        return [{"replicas": count, "passes": count >= threshold_of[cfg.seed]} for cfg, _, count, *_ in args]

    records, unused = verify_candidates(tasks, None, 1.0, SLO, run_tasks)
    for task, runs in zip(tasks, records, strict=True):
        alone = fewest_passing(lambda n, t=threshold_of[task.cfg.seed]: {"replicas": n, "passes": n >= t},
                               task.replicas, task.first_guess, task.max_runs)
        assert runs == alone
    assert sum(rounds) == sum(len(r) for r in records) + sum(unused)
    assert len(rounds) < sum(len(r) for r in records)
