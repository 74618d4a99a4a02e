"""The shared_prefix_stages validation workload (constant-rate stages over shared-prefix prompts):
its trace, its refusals, and the re-simulation fit recovering known engine terms."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sim.errors import InputError
from sim.inputs.engines import EngineOverhead, load_engine
from sim.validate.cases import Case
from sim.validate.fit_staged import fit_staged
from sim.validate.run import case_config, predict
from sim.validate.staged import parse_staged, simulate_stages, staged_trace

ARGS = {"rates": "4;8", "durations": "10;10", "groups": "2", "per_group": "3", "system": "100",
        "prompt_quantiles": "min:300;p50:320;max:340", "output": "30"}


def _case(metric: str, stage: int, value: float = 1.0, **extra) -> Case:
    return Case(case_id=f"c:{stage}:{metric}", source="hand-made", engine="vllm", model="llama-3-8b", gpu="h100-sxm",
                tp=1, weight_dtype="bf16", workload="shared_prefix_stages", num_requests=40, metric=metric,
                value=value, workload_args={**ARGS, "stage": str(stage), **extra},
                engine_args={"policy": "radix", "max_num_seqs": 64, "max_num_batched_tokens": 2048})


def test_the_trace_cycles_its_prompts_and_shares_each_groups_system_prompt():
    staged, _ = parse_staged("c", ARGS)
    trace, stage = staged_trace(staged)
    assert len(trace) == 40 + 80 and (stage == 0).sum() == 40
    assert np.allclose(np.diff(trace.arrival_s[:40]), 0.25) and trace.arrival_s[40] == pytest.approx(10.0)
    ids = [tuple(trace.hash_ids(i)) for i in range(len(trace))]
    assert len(set(ids)) == 6  # 2 groups x 3 prompts, each repeated
    assert ids[0] == ids[6] and trace.prompt_tokens[0] == trace.prompt_tokens[6]  # a prompt repeats every 6
    by_group = {}
    for row in ids:
        by_group.setdefault(row[:6], set()).add(row)  # 100-token system prompt: 6 full blocks of 16
    assert len(by_group) == 2 and all(len(v) == 3 for v in by_group.values())


@pytest.mark.parametrize(("key", "value", "match"), [
    ("rates", "4;x", "workload_args.rates"), ("durations", "10", "one duration per rate"),
    ("prompt_quantiles", "p50:320", "including min and max"), ("system", "400", "shorter than every prompt"),
    ("stage", "2", "stage index"), ("warmup", "1", "unknown key"), ("groups", "0", "whole number >= 1"),
])
def test_bad_workload_args_are_refused_by_name(key, value, match):
    with pytest.raises(InputError, match=match):
        parse_staged("file.csv:3", {**ARGS, key: value})


def test_an_overloaded_measurement_is_reported_not_compared():
    pred = predict(_case("mean_e2e_latency_ms", 0, measured="overloaded"))
    assert pred.predicted is None and "did not keep up" in pred.reason and pred.kept_up is True


def test_the_fit_recovers_a_known_front_end_and_residue():
    """Measurements simulated with known terms (residue 500 us, front end 7 ms) are fitted back."""
    truth = dataclasses.replace(EngineOverhead.from_preset(load_engine("vllm")), residue_s=500e-6, frontend_s=7e-3)
    cases = []
    for stage in (0, 1):
        for metric in ("mean_e2e_latency_ms", "mean_ttft_ms", "mean_tpot_ms"):
            case = _case(metric, stage)
            staged, _ = parse_staged(case.case_id, case.workload_args)
            stats = simulate_stages(case_config(case), staged, truth)[stage]
            cases.append(dataclasses.replace(case, value=getattr(stats, metric)))
    start = dataclasses.replace(truth, residue_s=0.0, frontend_s=0.0)
    fitted, error = fit_staged(cases, start)
    assert fitted.residue_s == pytest.approx(500e-6, abs=1e-9)
    assert fitted.frontend_s == pytest.approx(7e-3, abs=1.5e-4)
    assert error < 0.002
