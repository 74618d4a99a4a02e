"""The MoE validation rows (TensorRT-LLM perf-overview MoE tables): one-GPU runs and the multi-GPU
runs with expert parallelism and data-parallel attention (`enable_attention_dp: true`, `--ep`)."""

from __future__ import annotations

from sim.validate.cases import bundled_case_files, load_cases
from sim.validate.run import cannot_express, case_config, predict


def moe_cases():
    path = next(p for p in bundled_case_files() if p.name == "trtllm_perf_overview_moe_v1.0.csv")
    return load_cases([path])


def test_every_moe_row_is_expressible_and_split_fit_and_score():
    cases = moe_cases()
    assert all(cannot_express(c) is None for c in cases)
    assert {c.split for c in cases} == {"fit", "score"}
    assert sum(c.split == "score" for c in cases) >= len(cases) / 2
    multi = [c for c in cases if c.tp > 1]
    assert len(multi) >= 6 and {c.model for c in multi} >= {"Qwen3-235B-A22B", "Llama-4-Maverick"}


def test_attention_dp_rows_run_as_dp_attention_with_expert_parallelism():
    row = next(c for c in moe_cases() if c.tp == 8 and c.gpu == "H200")
    cfg = case_config(row)
    layout = (cfg.tp, cfg.dp, cfg.ep, cfg.enable_dp_attention, cfg.moe_a2a_backend)
    assert layout == (8, 8, 8, True, "allgather_reducescatter")
    assert "enable_attention_dp" not in cfg.model_dump()  # translated, never passed on as a knob
    prediction = predict(row, max_sim_requests=400)
    assert prediction.predicted is not None and prediction.predicted > 0
