"""Knobs that move real latency move the prediction, in the direction they move vLLM, on a fit case
of the real vLLM V1 serving runs (Llama-2-7B on H100, codegen, 10 req/s stage; stages shortened to
keep the test fast): fewer batched tokens per step spread prefills over more steps; fewer sequences
queue requests; less memory for KV evicts cached prompts (more recomputation); bigger blocks read
more padding and share prefixes more coarsely."""

from __future__ import annotations

import pytest

from sim.inputs.config import EngineConfig
from sim.validate.cases import bundled_case_files, load_cases
from sim.validate.run import case_config
from sim.validate.staged import parse_staged, simulate_stages

FIT_CASE = "llama-2-7b-tp1-codegen:stage1:mean_e2e_latency_ms"


@pytest.fixture(scope="module")
def fit_case():
    path = next(p for p in bundled_case_files() if p.stem == "vllm_v1_serving_h100")
    case = next(c for c in load_cases([path]) if c.case_id == FIT_CASE)
    assert case.split == "fit"
    staged, stage = parse_staged(case.case_id, {**case.workload_args, "durations": "30;60"})
    return case, staged, stage


def _stage(fit_case, stage: int | None = None, **knobs):
    case, staged, case_stage = fit_case
    cfg = EngineConfig.model_validate({**case_config(case).model_dump(exclude_defaults=True), **knobs})
    return simulate_stages(cfg, staged)[case_stage if stage is None else stage]


def test_a_smaller_token_budget_is_slower_while_prompts_are_computed(fit_case):
    """Stage 0 computes each of the 100 distinct prompts once (later repeats hit the prefix cache):
    a 256-token budget takes 3 steps per 591-token prompt where 2048 takes one. (E2E barely moves
    here, -1 %: the same prefill work, spread thinner over the decoders' steps.)"""
    base, small = _stage(fit_case, stage=0), _stage(fit_case, stage=0, max_num_batched_tokens=256)
    assert small.mean_ttft_ms > 1.05 * base.mean_ttft_ms
    assert small.p99_ttft_ms > base.p99_ttft_ms


def test_fewer_sequences_queue_requests(fit_case):
    base, few = _stage(fit_case), _stage(fit_case, max_num_seqs=8)
    assert few.mean_ttft_ms > 2 * base.mean_ttft_ms
    assert few.mean_e2e_latency_ms > base.mean_e2e_latency_ms


def test_less_memory_for_kv_recomputes_evicted_prompts(fit_case):
    base, tight = _stage(fit_case), _stage(fit_case, gpu_memory_utilization=0.3)
    assert tight.mean_ttft_ms > base.mean_ttft_ms
    assert tight.mean_e2e_latency_ms > base.mean_e2e_latency_ms


def test_bigger_blocks_read_more_padding(fit_case):
    base, big = _stage(fit_case), _stage(fit_case, block_size=64)
    assert big.mean_tpot_ms > base.mean_tpot_ms
