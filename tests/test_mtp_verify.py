"""Speculative verify steps priced as the engines run them (issue 35 item 5): the k+1 verify tokens of an
MLA model take the absorbed decode kernel in one batched step, so MTP at DeepSeek's reported acceptance
lowers TPOT on DeepSeek-R1 / H200 TP 8 at every batch from 1 to 64."""

from __future__ import annotations

import json
import shlex

import numpy as np
import pytest

from sim.engine.spec_decode import expected_tokens_per_step, make_spec_decoder
from sim.inputs.config import EngineConfig
from sim.inputs.model import load_model
from sim.inputs.workload.bench import bench_workload
from sim.run.invoke import run
from sim.run.simulate import _replica_parts

ACCEPTANCE = 0.85  # DeepSeek-V3 report, sec. 5.4.3: 85-90 % for the second token


def _config(k: int, engine: str | None = None) -> EngineConfig:
    spec = {"spec_tokens": k, "spec_method": "mtp", "spec_acceptance": [ACCEPTANCE]} if k else {}
    return EngineConfig(model="deepseek-r1", weight_dtype="fp8", hardware="h200", tp=8, engine=engine, **spec)


def _cost(cfg: EngineConfig):
    return _replica_parts(cfg, load_model(cfg.model), cfg.hardware, None)[1]


@pytest.mark.parametrize("batch", [3, 64])  # the scalar and the array paths of the hot step
def test_mla_verify_tokens_take_the_decode_kernel(batch):
    cost = _cost(_config(0))
    q, c = np.full(batch, 2), np.full(batch, 1500)
    as_prefill = {op.name for op in cost.breakdown(q, c, 2 * batch).ops}
    verify = cost.breakdown(q, c, 2 * batch, verify_tokens=2)
    names = {op.name for op in verify.ops}
    assert "kv_b_proj_context" in as_prefill and "prefill_attention" in as_prefill
    assert "kv_b_proj_context" not in names and "prefill_attention" not in names and "decode_attention" in names
    assert cost.step_time_s(q, c, 2 * batch, verify_tokens=2) == pytest.approx(verify.time_s, rel=1e-12)
    assert verify.time_s < cost.step_time_s(q, c, 2 * batch)


def test_a_longer_prefill_in_a_verify_step_still_reexpands_its_context():
    cost = _cost(_config(0))
    q, c = np.array([2, 2, 100]), np.array([1500, 900, 700])
    ops = {op.name: op for op in cost.breakdown(q, c, 5, verify_tokens=2).ops}
    alone = {op.name: op for op in cost.breakdown(q[2:], c[2:], 1).ops}
    assert ops["kv_b_proj_context"].flops == alone["kv_b_proj_context"].flops
    assert cost.step_time_s(q, c, 5, verify_tokens=2) == pytest.approx(cost.breakdown(q, c, 5, verify_tokens=2).time_s,
                                                                       rel=1e-12)


def test_verify_tokens_change_nothing_without_mla():
    cfg = EngineConfig(model="llama-3-8b", hardware="h100-sxm")
    cost = _cost(cfg)
    q, c = np.full(40, 3), np.full(40, 800)
    assert cost.step_time_s(q, c, 120, verify_tokens=3) == cost.step_time_s(q, c, 120)


@pytest.mark.parametrize("engine", [None, "vllm"])
def test_mtp_lowers_tpot_per_step_at_batch_1_to_64(engine):
    plain, spec = _cost(_config(0, engine)), make_spec_decoder(_config(1, engine), _cost(_config(1, engine)), 0)
    per_step = expected_tokens_per_step([ACCEPTANCE])
    for batch in (1, 8, 16, 32, 64):
        contexts = np.full(batch, 1500)
        plain_s = plain.step_time_s(np.ones(batch, dtype=np.int64), contexts, batch)
        mtp_tpot_s = spec.decode_step_time_s(contexts) / per_step
        assert mtp_tpot_s < plain_s / 1.3, (batch, plain_s, mtp_tpot_s)
        # the draft is one decoder layer's worth of work, not a step's
        assert spec.draft_time_s(contexts) < 2.5 * plain_s / load_model("deepseek-r1").n_layers


@pytest.mark.parametrize("batch", [1, 64])
def test_simulated_mtp_lowers_tpot(batch):
    workload = f"batch={batch},isl=1000,osl=100"
    plain = run(_config(0), bench_workload(workload)).summary
    mtp = run(_config(1), bench_workload(workload)).summary
    assert mtp["spec_decoding"]["acceptance_rate"] == pytest.approx(ACCEPTANCE, abs=0.1)
    assert mtp["tpot_s"]["mean"] < plain["tpot_s"]["mean"] / 1.3


def test_launch_lines_carry_the_engines_mtp_flags():
    from sim.planner.launch import launch_command

    cfg = _config(2, "vllm")
    launch = launch_command(cfg, 1)
    argv = shlex.split(launch["command"])
    spec = json.loads(argv[argv.index("--speculative-config") + 1])
    assert spec == {"method": "mtp", "num_speculative_tokens": 2}  # vLLM >= 0.11: deepseek_mtp is an alias
    assert not any("EAGLE" in m or "checkpoint" in m for m in launch["not_expressible"])
    sglang = launch["layout_lines"]["sglang"]
    flags = shlex.split(sglang["command"])
    for flag, value in (("--speculative-algorithm", "EAGLE"), ("--speculative-num-steps", "2"),
                        ("--speculative-eagle-topk", "1"), ("--speculative-num-draft-tokens", "3")):
        assert flags[flags.index(flag) + 1] == value
    assert not any("speculative decoding" in m for m in sglang["not_expressible"])
