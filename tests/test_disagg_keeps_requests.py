"""Disaggregation keeps every request: each engine preset's disaggregated path runs to completion
with every request finished once the prefill pool has filled and emptied many times over; the
hand-off gives back everything the prefill side held (blocks and, under TensorRT-LLM's
`reserve_full`, the reservation); a prefill replica reserves and checks only what it will hold (the
prompt and first token); and a run that exits 0 having rejected requests for lack of KV ends saying so."""

from __future__ import annotations

import json

import pytest
from conftest import ConstantCost, make_trace
from typer.testing import CliRunner

from sim.cli import app
from sim.engine.disagg.roles import PrefillRole
from sim.inputs.config import EngineConfig
from sim.run.simulate import simulate
from sim.run.summary import requests_frame

runner = CliRunner()
N_REQUESTS = 200
# 300 blocks per replica: a full-length reservation (500 + 60 tokens) is 18 blocks of 32 (TRT-LLM) or
# 35 of 16, so the prefill pool fills after a dozen or so requests and must empty again many times
FILLING_RUN = ["--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--bench", f"requests={N_REQUESTS},isl=500,osl=60",
               "--prefill-replicas", "1", "--decode-replicas", "1", "--num-gpu-blocks-override", "300", "--json"]


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_each_engine_disaggregated_finishes_every_request(engine):
    result = runner.invoke(app, ["simulate", "--engine", engine, *FILLING_RUN])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["n_finished"] == N_REQUESTS and summary["n_rejected"] == 0, summary["rejections"]


def _reserve_full_disagg(**knobs):
    base = dict(policy="chunked", prefill_replicas=1, decode_replicas=1, kv_transfer_gb_s=1.0,
                kv_transfer_latency_us=0.0, max_model_len=512, max_num_batched_tokens=256, block_size=16,
                watermark=0.0, kv_admission="reserve_full")
    base.update(knobs)
    return EngineConfig(**base)


def test_the_handoff_gives_back_the_prefill_reservation(monkeypatch):
    """Prompt 32, output 40: a prefill replica reserves ceil(33 / 16) = 3 blocks, not the 5 of the
    whole request, and has reserved nothing once the KV has landed."""
    reserved_at_release, left_after_release = [], []
    original = PrefillRole.release_handed_off

    def release(self, rid):
        reserved_at_release.append(self._reserved_blocks.get(rid))
        original(self, rid)
        left_after_release.append(rid in self._reserved_blocks)

    monkeypatch.setattr(PrefillRole, "release_handed_off", release)
    n = 40  # 40 x 3 blocks = 120 > the 64 of the pool: a leaked reservation would leave requests unscheduled
    result = simulate(_reserve_full_disagg(num_gpu_blocks_override=64),
                      make_trace([(0.01 * i, 32, 40) for i in range(n)]), cost=ConstantCost())
    frame = requests_frame(result)
    assert (frame["status"] == "FINISHED").all()
    assert reserved_at_release == [3] * n and left_after_release == [False] * n
    for replica in result.replicas:
        assert replica.sched._n_reserved == 0 and not replica.sched._reserved_blocks
        assert replica.sched.blocks.n_used == 0


def test_a_prefill_replica_does_not_refuse_a_prompt_for_the_output_it_never_holds():
    """Prompt 32 + output 200 needs 15 blocks; the 8-block caches hold the prompt (2 blocks) but not the
    whole request: the prefill replica computes the prompt and the decode replica, which would hold all
    of it, is the one that refuses."""
    result = simulate(_reserve_full_disagg(num_gpu_blocks_override=8), make_trace([(0.0, 32, 200)]),
                      cost=ConstantCost())
    row = requests_frame(result).iloc[0]
    assert row["status"] == "REJECTED" and row["reject_reason"].startswith("decode replica 1: prompt+output need")
    assert row["ttft_s"] > 0  # its first token came from the prefill replica


def test_an_exit_0_run_that_rejected_for_lack_of_kv_ends_saying_so(tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(app, ["simulate", "--engine", "trtllm", "--model", "llama-3.1-8b", "--hardware", "h100-sxm",
                                 "--bench", "requests=20,isl=500,osl=60", "--num-gpu-blocks-override", "8",
                                 "--out", str(out)])
    assert result.exit_code == 0, result.output
    last = result.output.strip().splitlines()[-1]
    assert last.startswith("rejected: 20 requests; first: prompt+output need 18 KV blocks; the cache holds 8"), last
    rejections = json.loads((out / "summary.json").read_text())["rejections"]
    assert rejections["n"] == 20 and rejections["first_reason"].startswith("prompt+output need 18 KV blocks")


@pytest.mark.parametrize("admission", ["reserve_full", "on_demand"])
def test_a_reserve_full_decode_replica_takes_a_transfer_only_when_it_fits_to_completion(admission):
    """12 requests of 32 in / 224 out end holding 16 blocks each; the decode cache has 40: under
    reserve_full (TensorRT-LLM admits a generation-only request by its blocks to completion) at most two
    decode at once and none is ever preempted; on demand, more start and some are preempted."""
    cfg = _reserve_full_disagg(num_gpu_blocks_override=40, kv_admission=admission, record_steps=True)
    result = simulate(cfg, make_trace([(0.0, 32, 224)] * 12), cost=ConstantCost())
    assert (requests_frame(result)["status"] == "FINISHED").all()
    steps = result.recorder.steps_frame()
    decode_batch_max = steps.loc[steps["replica"] == 1, "batch_size"].max()
    if admission == "reserve_full":
        assert decode_batch_max == 40 // 16 and result.recorder.preemptions == 0
        assert result.disagg.decode[0].sched._n_reserved == 0
    else:
        assert decode_batch_max > 2 and result.recorder.preemptions > 0
