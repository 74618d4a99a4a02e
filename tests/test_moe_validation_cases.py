"""The MoE validation rows (TensorRT-LLM perf-overview MoE tables): one-GPU runs are simulated,
runs that used expert parallelism with data-parallel attention are `cannot express: <why>`."""

from __future__ import annotations

from sim.validate.cases import bundled_case_files, load_cases
from sim.validate.run import cannot_express, case_config, predict


def moe_cases():
    path = next(p for p in bundled_case_files() if p.name == "trtllm_perf_overview_moe_v1.0.csv")
    return load_cases([path])


def test_at_least_15_expressible_moe_rows_split_fit_and_score():
    cases = moe_cases()
    expressible = [c for c in cases if cannot_express(c) is None]
    assert len(expressible) >= 15 and all(c.tp == 1 for c in expressible)
    assert {c.split for c in expressible} == {"fit", "score"}
    assert sum(c.split == "score" for c in expressible) >= len(expressible) / 2
    assert {c.model for c in expressible} == {"Qwen3-30B-A3B", "Llama-4-Scout"}


def test_multi_gpu_moe_rows_say_why_they_cannot_be_expressed():
    blocked = [c for c in moe_cases() if c.tp > 1]
    assert blocked and all("expert parallelism" in cannot_express(c) for c in blocked)
    prediction = predict(blocked[0])
    assert prediction.predicted is None and "data-parallel attention" in prediction.reason
    assert "enable_attention_dp" not in case_config(blocked[0]).model_dump()  # never passed on as a knob
