"""What a scheduler hands the engine: the sequences of the next step(s) and their time."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

_NO_IDS = np.empty(0, dtype=np.int64)
_NO_IDS.flags.writeable = False


@dataclass
class StepPlan:
    """One step, or `n_steps` decode steps run back to back (a decode run).

    `req_ids[i]` computes `new_tokens[i]` tokens in every step of the plan (a run past finishes:
    in its first `seq_steps[i]` steps, then it has finished). A decode run is only planned when
    nothing can change in between but the batch shrinking as sequences finish (no arrival that could
    join, enough free blocks, and a completion ends the run unless nothing waits for its seat), so it
    equals n_steps single steps (up to the order of floating-point sums).
    """

    req_ids: np.ndarray
    new_tokens: np.ndarray
    step_times_s: np.ndarray  # one entry per step
    is_decode_run: bool = False
    transfer_s: float = 0.0  # swap traffic over the host link, added to the first step
    # static batching: finished members that still occupy a seat and are computed (padding)
    padded_ids: np.ndarray = field(default_factory=lambda: _NO_IDS)
    # decode runs: KV tokens (whole blocks) the run's sequences hold at each step, when known
    block_tokens: np.ndarray | None = None
    # decode runs: steps until the first of its sequences generates its last token, when known
    steps_to_first_finish: int | None = None
    # speculative decoding (sim/engine/spec_decode.py): accepted proposals per sequence, kept on commit
    spec_extra: np.ndarray | None = None
    # single steps costed by the roofline hot path while latency attribution is on: its
    # `HotPath.step_parts`, from which attribution takes the decode-only step time
    cost_parts: tuple[int, float, int, float] | None = None
    # single steps: the first n_decoding sequences decode (one token each over a cached prompt), as in
    # chunked prefill's steps of the whole decoding batch plus prompt chunks
    n_decoding: int = 0
    # decode runs past finishes (sim/engine/sched/past_finishes.py): steps each sequence takes (the last of
    # them ends it), each step's end, how many sequences each step computes and blocks it takes
    seq_steps: np.ndarray | None = None
    step_end_s: np.ndarray | None = None
    n_active: np.ndarray | None = None
    block_taken: np.ndarray | None = None
    # speculative decoding: tokens the step's layers compute (k+1 per decoding sequence), which the
    # MoE layers of ranks in lockstep see (sim/engine/lockstep.py); None: the sum of new_tokens
    moe_tokens: int | None = None
    # decode runs of ranks in lockstep (sim.engine.lockstep): (ids, contexts, steps already grown) of the blocks
    # still to take, for the steps the group runs (`DecodeRuns.take_run_blocks`)
    blocks_to_take: tuple | None = None

    def __post_init__(self) -> None:
        self.n_steps = n_steps = self.step_times_s.shape[0]
        total_s = float(self.step_times_s[0]) if n_steps == 1 else float(np.add.reduce(self.step_times_s))
        self.duration_s = total_s + self.transfer_s


_ONES = np.ones(256, dtype=np.int64)
_ONES.flags.writeable = False


def ones_int64(n: int) -> np.ndarray:
    """A read-only array of n ones (a decode run's new tokens), without allocating each time."""
    global _ONES
    if n > _ONES.shape[0]:
        _ONES = np.ones(2 * n, dtype=np.int64)
        _ONES.flags.writeable = False
    return _ONES[:n]
