"""kv_admission reserve_full (TensorRT-LLM's GUARANTEED_NO_EVICT capacity scheduler): a request starts
only when the KV of its whole prompt + output fits beside what every admitted request will hold at its
end, so nothing is ever preempted and fewer long-output requests run at once than with on-demand blocks."""

from __future__ import annotations

import numpy as np
import pytest

from sim.inputs.config import EngineConfig
from sim.inputs.workload.trace import Trace
from sim.run.simulate import simulate
from sim.run.summary import summarize

N_BLOCKS, BLOCK, PROMPT, OUTPUT = 64, 16, 32, 224  # each request ends holding 256 tokens = 16 blocks


def _run(admission: str, policy: str = "chunked"):
    cfg = EngineConfig(model="llama-3-8b", hardware="h100-sxm", policy=policy, block_size=BLOCK,
                       num_gpu_blocks_override=N_BLOCKS, watermark=0.0, max_num_seqs=64,
                       max_num_batched_tokens=2048, kv_admission=admission, record_steps=True)
    n = 12
    trace = Trace(np.zeros(n), np.full(n, PROMPT), np.full(n, OUTPUT), source="kv admission test")
    result = simulate(cfg, trace)
    return summarize(result), result.recorder.steps_frame()


@pytest.mark.parametrize("policy", ["chunked", "continuous"])
def test_reserve_full_runs_only_what_fits_at_its_end_and_never_preempts(policy):
    reserved, steps = _run("reserve_full", policy)
    assert reserved["n_finished"] == 12 and reserved["preemptions"] == 0
    assert steps["batch_size"].max() == N_BLOCKS // (-(-(PROMPT + OUTPUT) // BLOCK))  # 4 at a time
    on_demand, steps_od = _run("on_demand", policy)
    assert steps_od["batch_size"].max() > 4  # blocks as tokens arrive: more start, some are preempted later
    assert reserved["e2e_s"]["mean"] != on_demand["e2e_s"]["mean"]


def test_reserve_full_is_the_trtllm_default_and_refused_where_it_means_nothing():
    assert EngineConfig(engine="trtllm").kv_admission == "reserve_full"
    assert EngineConfig(engine="vllm").kv_admission == "on_demand"
    with pytest.raises(ValueError, match="kv_admission"):
        EngineConfig(policy="radix", kv_admission="reserve_full")


def test_a_long_output_trtllm_fit_row_runs_what_fits_at_completion_where_on_demand_blocks_preempt():
    """TensorRT-LLM 0.19 perf overview, Llama-3.3-70B FP4 on one B200, 128 in / 2048 out (a split=fit
    row, max batch 512): with blocks on demand the simulated server starts all 512 and then preempts
    (recompute), which the engine's GUARANTEED_NO_EVICT scheduler never does; reserving to completion
    holds the running batch to what the pool fits at the requests' end, with no preemption. (Once the
    pool became TensorRT-LLM's share of free memory, on-demand's recomputation made it the slower of
    the two here: the rule is checked by what it does, not by which way it moves the error.)"""
    import dataclasses

    from sim.validate.cases import bundled_case_files, load_cases
    from sim.validate.run import case_config, case_workload

    path = next(p for p in bundled_case_files() if p.stem == "trtllm_perf_overview_v0.19.0")
    case = next(c for c in load_cases([path]) if c.case_id == "trtllm-0.19.0-llama-3.3-70b-b200-tp1-128-2048")
    assert case.split == "fit" and int(case.engine_args["max_num_seqs"]) == 512
    runs = {}
    for admission in ("on_demand", "reserve_full"):
        variant = dataclasses.replace(case, engine_args={**case.engine_args, "kv_admission": admission})
        cfg = case_config(variant, None).model_copy(update={"record_steps": True})
        result = simulate(cfg, case_workload(variant, 1200))
        runs[admission] = summarize(result), result.recorder.steps_frame()["batch_size"].max(), result
    (od, od_peak, _), (rf, rf_peak, rf_result) = runs["on_demand"], runs["reserve_full"]
    assert od["preemptions"] > 0 and od_peak == 512
    assert rf["preemptions"] == 0 and rf["n_finished"] == od["n_finished"] == 1200
    tokens_at_end = case.input_len + case.output_len
    blocks_each = -(-tokens_at_end // rf_result.cfg.block_size)
    fits_at_end = rf_result.num_gpu_blocks // blocks_each
    assert 0.95 * fits_at_end <= rf_peak <= fits_at_end < 512
