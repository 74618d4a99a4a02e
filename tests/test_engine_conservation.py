"""Conservation under seeded random small traces: every policy x preemption mode, caches small
enough that preemption (and radix eviction) happen. After each run every request is FINISHED or
REJECTED, every block is free or held by the radix cache only, and tokens add up; during the run
every committed step leaves the block tables consistent with the token counters."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import STEP_S, ConstantCost, make_trace
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sim.engine.request import Status
from sim.engine.sched.base import Scheduler
from sim.inputs.config import EngineConfig
from sim.run.simulate import simulate
from sim.run.summary import requests_frame

MAX_MODEL_LEN = 256
BLOCK_SIZE = 16


@st.composite
def small_traces(draw):
    """2-12 requests over ~20 steps; prompts up to 280 tokens (>= max_model_len 256 is rejected),
    outputs up to 60; hash ids from a small alphabet in a shared-prefix shape, so radix gets hits,
    misses and partial matches."""
    n = draw(st.integers(2, 12))
    arrivals = sorted(draw(st.lists(st.integers(0, 40), min_size=n, max_size=n)))
    prompts = draw(st.lists(st.integers(1, 280), min_size=n, max_size=n))
    outputs = draw(st.lists(st.integers(1, 60), min_size=n, max_size=n))
    hash_ids = []
    for prompt in prompts:
        n_ids = -(-prompt // BLOCK_SIZE)
        n_shared = draw(st.integers(0, min(n_ids, 4)))
        family = draw(st.integers(0, 2))
        own = draw(st.lists(st.integers(100, 140), min_size=n_ids - n_shared, max_size=n_ids - n_shared))
        hash_ids.append([family * 10 + j for j in range(n_shared)] + own)
    rows = [(a * STEP_S / 2, p, o) for a, p, o in zip(arrivals, prompts, outputs)]
    return make_trace(rows, hash_ids, hash_block_tokens=BLOCK_SIZE)


_UNPATCHED_COMMIT = Scheduler.commit


def checked_commit(monkeypatch, check_tables: bool) -> list[str]:
    """Wrap Scheduler.commit so each step re-checks the invariants that must hold between steps."""
    problems: list[str] = []
    original = _UNPATCHED_COMMIT

    def commit(self, plan, end_s):
        n_done = original(self, plan, end_s)
        t = self.table
        if check_tables:
            self.check_tables()
        live = np.isin(t.status, (Status.WAITING, Status.RUNNING, Status.SWAPPED))
        if (t.n_computed[live] > t.n_tokens[live]).any():  # static pads finished members: not live
            problems.append(f"n_computed > n_tokens at {end_s}")
        if not 0 <= self.blocks.n_used <= self.blocks.n_blocks:
            problems.append(f"{self.blocks.n_used} blocks used of {self.blocks.n_blocks}")
        return n_done

    monkeypatch.setattr(Scheduler, "commit", commit)
    return problems


def run_checked(monkeypatch, trace, policy, mode, n_blocks, chunk_size, max_num_seqs, request_chunk=None):
    """`chunk_size`: chunked prefill's token budget per step; `request_chunk`: one request's cap in it
    (several partial prefills then share a step and can run short of blocks together)."""
    budget = {"max_num_batched_tokens": chunk_size, "chunk_size": request_chunk} if policy in ("chunked", "radix") \
        else {}
    cfg = EngineConfig(policy=policy, preemption_mode=mode, num_gpu_blocks_override=n_blocks,
                       max_model_len=MAX_MODEL_LEN, block_size=BLOCK_SIZE, **budget,
                       max_num_seqs=max_num_seqs, swap_space=0.01)  # 0.01 GiB = 5 CPU blocks: swap fills up too
    problems = checked_commit(monkeypatch, check_tables=policy != "static")
    result = simulate(cfg, trace, cost=ConstantCost(swap_s_per_block=STEP_S / 8), core="engine")
    return result, requests_frame(result), problems


def assert_conserved(result, frame, problems):
    t = result.table
    assert problems == []
    assert set(frame["status"]) <= {"FINISHED", "REJECTED"}
    rejected = frame["status"] == "REJECTED"
    assert frame.loc[rejected, "reject_reason"].map(bool).all()
    assert frame.loc[~rejected, "reject_reason"].isna().all()
    finished = ~rejected.to_numpy()
    # output tokens produced = the wanted output clipped to max_model_len (RequestTable.output_tokens)
    assert (frame["output_tokens"].to_numpy()[finished] == t.output_tokens[finished]).all()
    assert (t.output_tokens <= np.maximum(result.table.trace.output_tokens, 1)).all()
    for replica in result.replicas:
        sched, blocks = replica.sched, replica.sched.blocks
        assert not sched.waiting and not sched.running and not sched.swapped
        radix = getattr(sched, "radix", None)
        assert blocks.n_used == (radix.n_cached_blocks if radix is not None else 0)
        refcounts = [blocks.refcount(b) for b in range(blocks.n_blocks)]
        assert min(refcounts) >= 0
        assert max(refcounts) <= 1  # only the cache holds anything now, once per block
        assert blocks.n_cpu_free == blocks.n_cpu_blocks
        assert not blocks._tables and not blocks._swapped  # every request let go of its table
        sched.check_tables()


def assert_timestamps(frame):
    done = frame[frame["status"] == "FINISHED"]
    assert done["first_token_s"].notna().all()
    assert (done["first_token_s"] > done["arrival_s"]).all()
    assert (done["ttft_s"] <= done["e2e_s"]).all()
    assert (done["scheduled_s"] >= done["arrival_s"]).all()
    assert (done["preempted_s"] >= 0).all()


SETTINGS = settings(max_examples=30, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
CASES = [(p, m) for p in ("continuous", "chunked", "radix") for m in ("recompute", "swap")] + [("static", "recompute")]
KNOBS = dict(n_blocks=st.integers(16, 48), chunk_size=st.sampled_from([16, 32, 64]),
             max_num_seqs=st.sampled_from([2, 4, 256]), request_chunk=st.sampled_from([None, 16]))


@pytest.mark.parametrize(("policy", "mode"), CASES)
@SETTINGS
@given(trace=small_traces(), **KNOBS)
def test_blocks_and_tokens_conserved(monkeypatch, policy, mode, trace, n_blocks, chunk_size, max_num_seqs,
                                     request_chunk):
    result, frame, problems = run_checked(monkeypatch, trace, policy, mode, n_blocks, chunk_size, max_num_seqs,
                                          request_chunk)
    assert_conserved(result, frame, problems)


@pytest.mark.parametrize(("policy", "mode"), CASES)
@example(trace=make_trace([(0.0, 33, 4)], [[1, 2, 3]], 16), n_blocks=16, chunk_size=16, max_num_seqs=256,
         request_chunk=None)
@SETTINGS
@given(trace=small_traces(), **KNOBS)
def test_first_token_after_arrival_and_before_finish(monkeypatch, policy, mode, trace, n_blocks, chunk_size,
                                                     max_num_seqs, request_chunk):
    result, frame, problems = run_checked(monkeypatch, trace, policy, mode, n_blocks, chunk_size, max_num_seqs,
                                          request_chunk)
    assert_timestamps(frame)


def test_the_random_cases_do_preempt_evict_and_reject(monkeypatch):
    """The strategy's knobs are tight enough to exercise preemption, swap, eviction and rejection."""
    rows = [(i * STEP_S / 4, 150 + 7 * i, 40) for i in range(8)] + [(0.5, 300, 60)]
    ids = [[1, 2, 3] + [100 + 10 * i + j for j in range(7)] for i in range(8)] + [list(range(200, 215))]
    trace = make_trace(rows, ids, hash_block_tokens=BLOCK_SIZE)
    seen = {}
    for policy, mode in CASES:
        result, frame, problems = run_checked(monkeypatch, trace, policy, mode, 20, 32, 256)
        assert_conserved(result, frame, problems)
        seen[(policy, mode)] = (result.recorder.preemptions, int((frame["status"] == "REJECTED").sum()),
                                result.evicted_blocks)
    assert seen[("continuous", "recompute")][0] > 0 and seen[("chunked", "swap")][0] > 0
    assert all(n_rejected == 1 for _, n_rejected, _ in seen.values())  # prompt 300 >= max_model_len
    assert seen[("radix", "recompute")][2] > 0
    assert status_counts(frame) == {"FINISHED": 8, "REJECTED": 1}


@pytest.mark.parametrize("mode", ["recompute", "swap"])
def test_partial_prefills_short_of_blocks_are_preempted_not_stalled(monkeypatch, mode):
    """Six prompts of 96 tokens arrive together; a 16-token cap per request lets all six prefill in
    parallel until the 30 blocks run out with every one of them mid-prompt and nothing decoding.
    The newest is preempted (nothing admitted meanwhile) until the rest can go on: all finish."""
    trace = make_trace([(0.0, 96, 8)] * 6, None, 16)
    result, frame, problems = run_checked(monkeypatch, trace, "chunked", mode, 30, 96, 256, request_chunk=16)
    assert_conserved(result, frame, problems)
    assert status_counts(frame) == {"FINISHED": 6}
    assert result.recorder.preemptions > 0


def test_a_stalled_scheduler_fails_loudly(monkeypatch):
    """Without the preemption above the batch stalls; the run must say so rather than report the
    requests that did finish as the whole run."""
    from sim.engine.sched.chunked import ChunkedScheduler

    monkeypatch.setattr(ChunkedScheduler, "schedule", ChunkedScheduler._plan)
    with pytest.raises(RuntimeError, match="stalled with 6 of 6 requests"):
        run_checked(monkeypatch, make_trace([(0.0, 96, 8)] * 6, None, 16), "chunked", "recompute", 30, 96, 256,
                    request_chunk=16)


def status_counts(frame) -> dict:
    return {name: int(n) for name, n in frame["status"].value_counts().items()}


def test_a_swapped_request_that_cannot_come_back_is_rejected_not_stalled():
    """Radix with swap on a tiny cache (300 blocks of 32 tokens) and Mooncake's long prompts: one
    request, swapped out, comes back into fresh blocks while the prefix cache pins older copies of its
    prefix, so it can no longer grow (it needs 288 of the 300 blocks). With nothing else to run it is
    rejected with a reason; before, the run stalled with most requests still queued."""
    from sim.run.invoke import load_run_workload

    workload = load_run_workload("mooncake_conversation", rate_scale=0.25, max_requests=60)
    cfg = EngineConfig(policy="radix", preemption_mode="swap", num_gpu_blocks_override=300, max_num_seqs=16,
                       block_size=32, seed=40, max_model_len=131072, chunk_size=256, cpu_cache_gib=1.0)
    frame = requests_frame(simulate(cfg, workload))
    assert set(frame["status"]) == {"FINISHED", "REJECTED"}
    reasons = frame["reject_reason"].dropna()
    assert reasons.str.startswith("swapped out and could not come back").sum() == 1
    assert (frame["status"] == "FINISHED").sum() == 31
