"""The InferenceMAX H200 / B200 development set as bundled validation cases (issue 46 item 5):
counts per engine, the split by configuration, attribution on every row, the random lengths of
the benchmark's dataset and the per-GPU throughput metric."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from calibrate.inferencemax_cases import assign_splits
from sim.errors import InputError
from sim.validate.cases import CASES_DIR, load_cases
from sim.validate.run import cannot_express, case_config, case_workload, predict

PATH = CASES_DIR / "inferencemax_h200_b200.csv"
METRICS_PER_EXPERIMENT = 8  # TTFT and TPOT mean / median / p99, mean E2E, output tok/s per GPU


@pytest.fixture(scope="module")
def cases():
    return load_cases([PATH])


def _config_key(case) -> str:
    return case.case_id.split(":")[0]


def test_experiments_per_engine_and_gpu_match_the_source_readme(cases):
    experiments = Counter((c.engine, c.gpu) for c in cases if c.metric == "mean_ttft_ms")
    assert experiments == {("sglang", "b200"): 48, ("sglang", "h200"): 15, ("vllm", "b200"): 56,
                           ("vllm", "h200"): 51, ("trtllm", "b200"): 40}
    per_experiment = Counter(c.case_id.rsplit(":", 1)[0] for c in cases)
    assert set(per_experiment.values()) == {METRICS_PER_EXPERIMENT}
    assert len(cases) == 210 * METRICS_PER_EXPERIMENT


def test_split_is_by_configuration_and_follows_the_stated_hash_rule(cases):
    experiments = Counter(_config_key(c) for c in cases if c.metric == "mean_ttft_ms")
    splits = assign_splits(dict(experiments))
    assert splits == assign_splits(dict(reversed(list(experiments.items()))))  # not the file's order
    for case in cases:  # every concurrency point of a configuration on its configuration's side
        assert case.split == splits[_config_key(case)], case.case_id
    for engine in ("sglang", "vllm", "trtllm"):
        n_fit = sum(n for key, n in experiments.items() if key.startswith(engine + "-") and splits[key] == "fit")
        n_all = sum(n for key, n in experiments.items() if key.startswith(engine + "-"))
        assert n_all / 2 - 6 <= n_fit <= n_all / 2, engine  # at most half, short by less than one configuration


def test_every_row_cites_the_result_artifact_and_the_launch_script(cases):
    for case in cases:
        assert re.search(r"gminneci/mantile@[0-9a-f]{40}:\S+/agg_bmk\.json", case.source), case.case_id
        assert re.search(r"SemiAnalysisAI/InferenceX@[0-9a-f]{40}:benchmarks/\S+\.sh", case.source), case.case_id
        assert case.note.startswith("InferenceMAX run "), case.case_id
        assert "not modelled: " in case.note, case.case_id


def test_engine_knobs_reach_the_config(cases):
    dpa = next(c for c in cases if c.engine == "trtllm" and "dpa1" in c.case_id)
    cfg = case_config(dpa)
    assert (cfg.dp, cfg.ep, cfg.enable_dp_attention) == (dpa.tp, dpa.tp, True)
    sglang = next(c for c in cases if c.engine == "sglang" and "-ep8-" in c.case_id)
    cfg = case_config(sglang)
    assert (cfg.ep, cfg.policy, cfg.max_num_seqs, cfg.chunk_size) == (8, "chunked", 256, 16384)
    h200 = next(c for c in cases if c.engine == "vllm" and c.gpu == "h200")
    assert case_config(h200).max_num_seqs == h200.concurrency  # max-num-seqs = concurrency on the H200 runs
    assert case_config(h200).kv_dtype == "bf16"


def test_lengths_are_uniform_in_the_benchmarks_range_and_deterministic(cases):
    case = next(c for c in cases if c.input_len == 8192 and c.output_len == 1024)
    first, again = case_workload(case, 400), case_workload(case, 400)
    prompt, output = first.pool.prompt_tokens, first.pool.output_tokens
    assert prompt.min() >= 6553 and prompt.max() <= 8192 and output.min() >= 819 and output.max() <= 1024
    assert len(np.unique(prompt)) > 100
    assert np.array_equal(prompt, again.pool.prompt_tokens)


def test_a_small_experiment_predicts_every_metric_from_one_simulation(cases):
    rows = [c for c in cases if c.case_id.startswith("trtllm-gpt-oss-120b-mxfp4-b200-tp4-ep1-dpa0-1024x1024:c4:")]
    preds = {p.case.metric: p for p in (predict(c) for c in rows)}
    assert len(preds) == METRICS_PER_EXPERIMENT and all(p.predicted > 0 for p in preds.values())
    assert preds["p99_ttft_ms"].predicted >= preds["median_ttft_ms"].predicted
    per_gpu = preds["output_throughput_per_gpu_tok_s"]
    whole = predict(replace(per_gpu.case, metric="output_throughput_tok_s"))
    assert per_gpu.predicted == pytest.approx(whole.predicted / per_gpu.case.tp)


def test_a_workload_argument_nothing_reads_is_refused(tmp_path):
    text = PATH.read_text(encoding="utf-8").splitlines()
    for bad, field in (("range_ratio=0.8", "workload_args.range_ratio"), ("ratio=0.8", "workload_args.ratio")):
        row = text[1].replace("range_ratio=0.8", "range_ratio=1.5" if bad == "range_ratio=0.8" else bad)
        path = tmp_path / "bad.csv"
        path.write_text(text[0] + "\n" + row + "\n", encoding="utf-8")
        with pytest.raises(InputError, match=re.escape(field)):
            load_cases([path])


def test_runs_with_a_start_up_stall_compare_only_their_medians_and_per_token_times(cases):
    stalled = [c for c in cases if c.workload_args.get("measured") == "startup_stall"]
    experiments = {c.case_id.rsplit(":", 1)[0] for c in stalled}
    assert len(experiments) == 14 and {(c.engine, c.gpu) for c in stalled} == {("sglang", "b200")}
    assert all(c.num_requests == 10 * c.concurrency for c in stalled)
    assert all(c.metric != "median_ttft_ms" or c.value < 0.2 * 30_000 for c in stalled)
    smallest = min(experiments, key=lambda e: int(e.rsplit(":c", 1)[1]))
    rows = {c.metric: c for c in stalled if c.case_id.startswith(smallest + ":")}
    assert cannot_express(rows["mean_ttft_ms"]) is not None and cannot_express(rows["p99_ttft_ms"]) is not None
    assert cannot_express(rows["output_throughput_per_gpu_tok_s"]) is not None
    assert cannot_express(rows["median_ttft_ms"]) is None and cannot_express(rows["mean_tpot_ms"]) is None


def test_an_unknown_measured_flag_is_refused(tmp_path):
    text = PATH.read_text(encoding="utf-8").splitlines()
    path = tmp_path / "bad.csv"
    path.write_text(text[0] + "\n" + text[1].replace("range_ratio=0.8", "range_ratio=0.8 measured=stalled") + "\n",
                    encoding="utf-8")
    with pytest.raises(InputError, match="workload_args.measured"):
        load_cases([path])
