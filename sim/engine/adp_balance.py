"""TensorRT-LLM's attention-DP balancing (`attention_dp_config.enable_balance`), per lockstep group.

What the engine does (TensorRT-LLM `_torch/pyexecutor/py_executor.py` `_balance_adp_requests`): every
iteration the attention-DP ranks all-gather how many context and generation requests each scheduled.
When every rank has a context request and a free slot (generation requests < max_batch_size), the wait
counter is reset and, while every rank also has generation requests, context requests are held for up to
`batching_wait_iters` iterations (to batch more of them). Otherwise every rank holds its context requests
and counts the iteration; they go when the count reaches `timeout_iters`, or at once when some rank has no
generation request. So at moderate load a context request waits for every rank to have one, and that
wait, not the GPU, sets TTFT.

Here (`LockstepGroup`, sim/engine/lockstep.py): before each group step the balancer reads each rank's
scheduler (a rank has context work when it has a partial prefill or a waiting request, generation work
when a running sequence decodes) and, when it holds, every rank runs one step of its decodes only
(`Scheduler.holds_context`, honoured by the chunked schedulers). Waiting requests count as context even
when the KV cache could not take them yet (the engine counts only those its capacity scheduler fits)."""

from __future__ import annotations


class AdpBalancer:
    """The balancing counters of one attention-DP group (one replica's ranks)."""

    def __init__(self, timeout_iters: int, batching_wait_iters: int):
        self.timeout_iters, self.batching_wait_iters = timeout_iters, batching_wait_iters
        self.waiting_iters = 0
        self.batching_iters = 0
        self._counting = False  # the last decision counted a wait (some rank had no context request)

    def hold(self, scheds: list) -> bool:
        """Whether this iteration's context requests are held on every rank (and count the iteration)."""
        has_ctx, has_gen, free = [], [], []
        for sched in scheds:
            decoding, prefilling = sched.split_decoding(sched.running)
            has_ctx.append(bool(prefilling) or bool(sched.waiting))
            has_gen.append(bool(decoding))
            free.append(len(decoding) < sched.cfg.max_num_seqs)
        self._counting = False
        if all(free) and all(has_ctx):
            self.waiting_iters = 0
            if not all(has_gen):
                return False
            if self.batching_iters < self.batching_wait_iters:
                self.batching_iters += 1
                return True
            self.batching_iters = 0
            return False
        self.waiting_iters += 1
        if self.waiting_iters >= self.timeout_iters or not all(has_gen):
            self.waiting_iters = 0
            return False
        self._counting = True
        return any(has_ctx)  # nothing to hold: decode runs may go on (their iterations counted by `ran`)

    def ran(self, n_steps: int) -> None:
        """The group ran `n_steps` iterations on one decision (a decode run); each one after the first
        counts as the engine would count it (nothing changes on a rank during a run)."""
        if self._counting and n_steps > 1 and self.timeout_iters > 0:
            self.waiting_iters = (self.waiting_iters + n_steps - 1) % self.timeout_iters
