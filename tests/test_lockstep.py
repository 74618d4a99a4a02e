"""Data-parallel attention ranks step together (sim/engine/lockstep.py, docs/parallelism.md)."""

import numpy as np
import pytest

from sim.cost.expert_parallel import ExpertParallelCostModel, ExpertParallelism
from sim.engine.lockstep import LockstepGroup, lockstep_step_times
from sim.engine.sched.plan import StepPlan
from sim.inputs.config import EngineConfig
from sim.inputs.hardware import load_hardware
from sim.inputs.layout.parallel import ReplicaLayout
from sim.inputs.model import load_model
from sim.inputs.workload.trace import Trace
from sim.run.simulate import simulate

QWEN = load_model("qwen3-30b-a3b")
H100 = load_hardware("h100-sxm")
DP2 = ReplicaLayout(tp=2, dp=2, ep=2, enable_dp_attention=True)


def _cost() -> ExpertParallelCostModel:
    return ExpertParallelCostModel(QWEN, H100, DP2, "bf16", "bf16", 16,
                                   expert_parallel=ExpertParallelism.of(DP2))


def _plan(new_tokens: list[int], contexts: list[int], cost) -> StepPlan:
    q, c = np.array(new_tokens, dtype=np.int64), np.array(contexts, dtype=np.int64)
    return StepPlan(np.arange(len(q)), q, np.array([cost.step_time_s(q, c, len(q))]))


def test_equal_ranks_keep_their_own_step_times_and_an_idle_rank_frees_the_moe_layer():
    cost = _cost()
    decode = _plan([1] * 64, [1000] * 64, cost)
    same = lockstep_step_times([decode, _plan([1] * 64, [1000] * 64, cost)], [cost, cost], 1)
    assert same[0] == pytest.approx(decode.step_times_s[0], rel=1e-12)  # each priced as if the other matched it
    alone = lockstep_step_times([decode, None], [cost, cost], 1)  # the other rank runs a dummy batch
    assert alone[0] < decode.step_times_s[0]  # its MoE layers see 64 tokens, not 2 x 64
    moe_64, moe_128 = cost.moe_group_layer_s(64), cost.moe_group_layer_s(128)
    assert alone[0] == pytest.approx(decode.step_times_s[0] - QWEN.n_layers * (moe_128 - moe_64), rel=1e-12)


def test_a_ranks_prefill_sets_the_groups_step():
    cost = _cost()
    decode = _plan([1] * 8, [500] * 8, cost)
    prefill = _plan([4096], [0], cost)
    step = lockstep_step_times([decode, prefill], [cost, cost], 1)[0]
    assert step > 5 * decode.step_times_s[0]  # the decoding rank waits for the prefill
    assert step == pytest.approx(prefill.step_times_s[0] + QWEN.n_layers * (
        cost.moe_group_layer_s(4104) - cost.moe_group_layer_s(8192)), rel=1e-12)


def _run(arrival_s, prompt, output, **knobs):
    cfg = EngineConfig(model="qwen3-30b-a3b", hardware="h100-sxm", tp=2, dp=2, enable_dp_attention=True, ep=2,
                       max_num_seqs=64, max_num_batched_tokens=8192, policy="chunked", **knobs)
    trace = Trace(np.array(arrival_s, dtype=np.float64), np.array(prompt), np.array(output))
    return simulate(cfg, trace)


def test_one_ranks_prefill_lengthens_the_other_ranks_decode():
    """Request 0 decodes on rank 0; request 1 (round-robin: rank 1) brings an 8,000-token prompt
    mid-way. In lockstep, rank 0's decode steps wait for rank 1's prefill chunk."""
    alone = _run([0.0], [100], [200])
    both = _run([0.0, 0.3], [100, 8000], [200, 5])
    assert both.replicas[0].sched.replica == 0 and both.table.replica[1] == 1
    e2e_alone = float(alone.table.finish_s[0] - alone.table.arrival_s[0])
    e2e_both = float(both.table.finish_s[0] - both.table.arrival_s[0])
    cost = both.replicas[1].sched.cost
    prefill = _plan([8000], [0], cost)  # rank 1's one chunk
    decode = _plan([1], [150], cost)  # rank 0's step at about that time
    stalled_s = lockstep_step_times([decode, prefill], [cost, cost], 1)[0]
    decode_s = lockstep_step_times([decode, None], [cost, cost], 1)[0]
    assert stalled_s > 20 * decode_s
    assert e2e_both - e2e_alone > 0.9 * (stalled_s - decode_s)
    # request 1 started on an otherwise idle group step: its TTFT is its prefill, not more
    assert both.table.first_token_s[1] - 0.3 < stalled_s + 2 * decode_s


def test_ranks_step_together_and_give_every_block_back():
    rng = np.random.default_rng(3)
    n = 40
    result = _run(np.sort(rng.uniform(0, 2, n)), rng.integers(50, 3000, n), rng.integers(5, 300, n),
                  record_steps=True)
    assert np.all(np.isfinite(result.table.finish_s[:n]))
    assert len({id(replica.group) for replica in result.replicas}) == 1
    assert isinstance(result.replicas[0].group, LockstepGroup)
    for replica in result.replicas:  # decode runs cut to the group's steps gave back what they took
        assert replica.sched.blocks.n_free == replica.sched.blocks.n_blocks
    steps = result.recorder.steps_frame()
    own = {r: steps[steps.replica == r] for r in (0, 1)}
    other = {r: set(zip(np.round(s.start_s, 9), np.round(s.start_s + s.step_time_s, 9))) for r, s in own.items()}
    n_shared = 0
    for rank, mate in ((0, 1), (1, 0)):  # a rank's step is its mate's step too, or the mate is idle throughout
        for start, end in zip(own[rank].start_s, own[rank].start_s + own[rank].step_time_s):
            key = (round(start, 9), round(end, 9))
            if key in other[mate]:
                n_shared += 1
                continue
            mate_steps = own[mate]
            overlaps = (mate_steps.start_s < end - 1e-9) & (mate_steps.start_s + mate_steps.step_time_s > start + 1e-9)
            assert not overlaps.any(), (rank, start, end)
    assert n_shared > 0.5 * len(steps)


def test_same_inputs_same_outputs():
    args = ([0.0, 0.1, 0.2, 0.25], [300, 2000, 50, 900], [40, 10, 80, 20])
    a, b = _run(*args), _run(*args)
    assert np.array_equal(a.table.finish_s[:4], b.table.finish_s[:4])


def test_shrink_gives_back_the_tail_blocks_of_a_table():
    from sim.engine.kv.blocks import BlockManager

    blocks = BlockManager(10, 4)
    blocks.grow(7, 17)  # 5 blocks
    head = list(blocks.table(7))
    assert blocks.shrink(7, 9) == 2  # 9 tokens: 3 blocks kept
    assert blocks.table(7) == head[:3] and blocks.n_free == 7
    assert blocks.shrink(7, 12) == 0  # already covered
    blocks.grow(8, 8)  # the freed blocks come back first, in table order
    assert blocks.table(8) == head[3:5]
