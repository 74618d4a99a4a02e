"""trtllm-bench's max batch size / max num tokens heuristic, as written into the TensorRT-LLM cases."""

from __future__ import annotations

import pytest

from calibrate.trtllm_bench_settings import bench_settings, simulated_limits
from sim.validate.cases import bundled_case_files, load_cases
from sim.validate.names import dtype_name, gpu_name, model_name


def test_kv_limited_run_hand_computed():
    # Llama-3.3-70B NVFP4 on one B200 (179.06 GiB), FP8 KV, ISL/OSL 128/128:
    # weights 70.55e9 x 0.5 B = 32.85 GiB; KV per token 2 x 80 x 8 x 128 x 1 B = 1.526e-4 GiB;
    # requests = (179.06 - 32.85) x 0.90 / (1.526e-4 x 256) = 3369 -> batch 256 x ceil(3369/256) = 3584;
    # tokens 3369 x (1 + 1) = 6737 -> 512 x ceil(6737/512) = 7168 (>= ISL + batch).
    assert bench_settings("llama-3.3-70b", "b200", 1, "fp4", "fp8", 128, 128) == (3584, 7168)


def test_caps_and_floors():
    # eight GPUs hold far more than 4096 requests of 256 tokens: batch capped at 4096, tokens 4096 x 2
    assert bench_settings("llama-3.3-70b", "b200", 8, "fp4", "fp8", 128, 128) == (4096, 8192)
    # long prompts: few requests fit, batch floor 64, and without chunking tokens >= ISL + batch
    bs, tokens = bench_settings("llama-3.1-8b", "h100-sxm", 1, "fp8", "fp8", 20000, 2000)
    assert bs == 64 and tokens == 20000 + 64


def test_bundled_trtllm_cases_carry_the_heuristic_settings():
    files = [p for p in bundled_case_files() if p.name.startswith("trtllm_perf_overview")]
    cases = load_cases(files)
    assert len(cases) >= 80
    for case in cases:
        where = case.case_id
        expected = simulated_limits(*bench_settings(model_name(where, case.model), gpu_name(where, case.gpu), case.tp,
                                                    dtype_name(where, "weight_dtype", case.weight_dtype),
                                                    dtype_name(where, "kv_dtype", case.kv_dtype), case.input_len,
                                                    case.output_len, case.pp), case.pp)
        got = (int(case.engine_args["max_num_seqs"]), int(case.engine_args["max_num_batched_tokens"]))
        assert got == expected, case.case_id


@pytest.mark.parametrize("isl_osl", [(128, 2048), (1000, 1000), (5000, 500)])
def test_more_tokens_per_request_never_raises_the_batch(isl_osl):
    isl, osl = isl_osl
    small = bench_settings("llama-3.1-8b", "h200", 1, "fp8", "fp8", 128, 128)[0]
    assert bench_settings("llama-3.1-8b", "h200", 1, "fp8", "fp8", isl, osl)[0] <= small


def test_pipeline_stages_split_the_batch_into_micro_batches():
    # Llama-3.3-70B NVFP4 on 2 x RTX PRO 6000 (89.41 GiB each) as TP1 x PP2, FP8 KV, ISL/OSL 1000/1000:
    # weights 32.85 GiB over 178.82 GiB; requests = 145.97 x 0.90 / (1.526e-4 x 2000) = 430.4;
    # per micro-batch 430.4 / 2 = 215.2 -> batch 32 x ceil(215.2/32) = 224; tokens 430.4 -> floor 2048.
    assert bench_settings("llama-3.3-70b", "rtx-pro-6000", 1, "fp4", "fp8", 1000, 1000, pp=2) == (224, 2048)
    # one simulated step spans both micro-batches in flight
    assert simulated_limits(224, 2048, 2) == (448, 4096)
    # the same two GPUs as TP2 hold the same KV (max(tp, kv_heads) = 8 heads): no division by pp
    assert bench_settings("llama-3.3-70b", "rtx-pro-6000", 2, "fp4", "fp8", 1000, 1000) == (512, 2048)
