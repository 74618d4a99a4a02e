"""The simulator's hot path: step totals only, from the same formulas as `CostModel.breakdown`
(tests hold the two equal), with per-call work cut to a few scalar or O(batch) operations.

Token-count-dependent per-layer ops and the LM head come from lookup tables over token count;
attention is computed from a step's sums (`AttentionLoad` fields) in plain float arithmetic.
"""

from __future__ import annotations

import math

import numpy as np

from sim.cost.block_residues import half_steps, whole_block_tokens_per_step
from sim.cost.runs_past_finishes import decode_steps_past_finishes
from sim.cost.shapes import attention_load
from sim.cost.views import CostModelView
from sim.cost.window import decode_run_sums, window_sums, window_sums_scalar

SCALAR_MAX_SEQS = 32  # steps of at most this many sequences take the plain-Python path


class HotPath:
    def __init__(self, cost: CostModelView):
        eff, model = cost.eff, cost.model
        self.cost = cost
        self.block_size = cost.block_size
        self.n_layers = model.n_layers
        self.p = eff.roofline_blend
        # below this ratio of the smaller to the larger time, ratio ** p < 1e-17 and 1 + ratio ** p == 1.0
        # in float: the blend IS the larger time, bit for bit (a decode step is memory-bound on most GPUs)
        self.negligible_ratio = 0.0 if math.isinf(self.p) else 1e-17 ** (1.0 / self.p)
        self.launch_s = eff.kernel_launch_us * 1e-6
        self.overhead_s = cost.overhead_s
        qh_d = cost.q_heads_gpu * model.head_dim
        attn_rate = cost.attn_peak_flops * eff.attention_compute
        self.pair_s = 4.0 * qh_d / attn_rate  # compute seconds per causal query-key pair
        self.prefill_pair_s = self.pair_s
        if model.mla is not None:  # absorbed decode vs plain prefill (sim/cost/mla.py)
            self.pair_s = cost.pair_flops["decode_attention"] / attn_rate
            self.prefill_pair_s = cost.pair_flops["prefill_attention"] / attn_rate
        self.kv_token_bytes = cost.kv_bytes_per_token_layer_gpu
        self.io_token_bytes = 2.0 * qh_d * cost.act_bytes_el  # q in, output out
        self.kv_bw = cost.bandwidth * cost._paged_eff  # prefill and decode both read paged KV
        self.prefill_ratio, self.decode_ratio = cost.prefill_ratio, cost.decode_ratio  # measured tables or None
        self.window = cost.window  # sliding / chunked layers (sim/cost/window.py), None without
        self.mla_context = cost.mla_context is not None  # MLA: cached latents re-expanded in prefill
        if self.window is not None:
            self._split_windowed_layers(model)

    def _split_windowed_layers(self, model) -> None:
        """Attention of an average layer = full share x full attention + windowed share x windowed
        attention; the blend scales with its inputs, so scaling the per-pair, per-byte and launch
        terms by a share scales that part's time."""
        full = model.n_layers_of("full") / model.n_layers
        terms = ("pair_s", "prefill_pair_s", "kv_token_bytes", "io_token_bytes", "launch_s")
        self.win_terms = {name: getattr(self, name) * (1.0 - full) for name in terms}
        for name in terms:
            setattr(self, name, getattr(self, name) * full)

    def _blend(self, t_compute: float, t_memory: float) -> float:
        top = max(t_memory, t_compute)
        if top <= 0.0 or math.isinf(self.p) or min(t_memory, t_compute) < top * self.negligible_ratio:
            return top
        return top * ((t_compute / top) ** self.p + (t_memory / top) ** self.p) ** (1.0 / self.p)

    def _attention_s(self, pairs: float, kv_tokens: float, n_tokens: float, bandwidth: float,
                     pair_s: float | None = None) -> float:
        if n_tokens <= 0:
            return 0.0
        t_memory = (kv_tokens * self.kv_token_bytes + n_tokens * self.io_token_bytes) / bandwidth
        return self._blend(pairs * (self.pair_s if pair_s is None else pair_s), t_memory) + self.launch_s

    def _mla_context_s(self, context_tokens: int) -> float:
        """Per-layer time of re-expanding `context_tokens` cached latents (0 for none)."""
        if context_tokens <= 0:
            return 0.0
        return float(self.cost.mla_context_op(np.array([float(context_tokens)]))[1][0])

    def _window_s(self, pairs: float, kv_tokens: float, n_tokens: float, prefill: bool) -> float:
        """The windowed layers' share of a layer's attention (0 without windowed layers)."""
        if n_tokens <= 0:
            return 0.0
        w = self.win_terms
        t_memory = (kv_tokens * w["kv_token_bytes"] + n_tokens * w["io_token_bytes"]) / self.kv_bw
        pair_s = w["prefill_pair_s"] if prefill else w["pair_s"]
        return self._blend(pairs * pair_s, t_memory) + w["launch_s"]

    def _with_window(self, parts: tuple[int, float, int, float], sums, n_prefill_tokens: float):
        n_tokens, prefill_s, n_decode, decode_s = parts
        pairs_p, kv_p, pairs_d, kv_d = sums
        prefill_s += self._window_s(pairs_p, kv_p, n_prefill_tokens, True)
        decode_s += self._window_s(pairs_d, kv_d, n_decode, False)
        return n_tokens, prefill_s, n_decode, decode_s

    def step_time_s(self, new_tokens: np.ndarray, cached_tokens: np.ndarray, n_sampled: int) -> float:
        """Total time of one step of sequences bringing `new_tokens` over `cached_tokens`."""
        return self.total_s(self.step_parts(new_tokens, cached_tokens), n_sampled)

    def step_time_s_scalar(self, new_tokens: list[int], cached_tokens: list[int], n_sampled: int) -> float:
        """`step_time_s` in plain Python for a few sequences (an array operation costs as much as
        a Python loop over ~10 items). Same value bit for bit: the sums are of integers and
        half-integers, which floats hold exactly, whatever the order."""
        return self.total_s(self.step_parts_scalar(new_tokens, cached_tokens), n_sampled)

    def total_s(self, parts: tuple[int, float, int, float], n_sampled: int) -> float:
        """A step's time from its `step_parts` and the tokens it samples."""
        n_tokens, prefill_s, _, decode_s = parts
        layer_s = self.cost.layer_time_s(n_tokens) + prefill_s + decode_s
        return self.n_layers * layer_s + self.cost.lm_head_time_s(n_sampled) + self.overhead_s

    def decode_only_s(self, parts: tuple[int, float, int, float]) -> float:
        """The time of a step of the parts' decoding sequences (new token 1) alone: what
        `step_time_s(ones, their contexts, their count)` gives, bit for bit."""
        _, _, n_decode, decode_s = parts
        return self.total_s((n_decode, 0.0, n_decode, decode_s), n_decode)

    def step_parts(self, new_tokens: np.ndarray, cached_tokens: np.ndarray) -> tuple[int, float, int, float]:
        """(tokens, prefill attention s per layer, decoding sequences, decode attention s per layer)."""
        if new_tokens.shape[0] <= SCALAR_MAX_SEQS:
            return self.step_parts_scalar(new_tokens.tolist(), cached_tokens.tolist())
        q = new_tokens
        c = cached_tokens
        size = self.block_size
        kv_tokens = -(-(c + q) // size) * size
        decode = q == 1
        n_decode = int(np.count_nonzero(decode))
        n_tokens = int(np.add.reduce(q))
        if n_decode == q.shape[0]:
            prefill_s = 0.0
            pairs_d = float(np.add.reduce(c)) + 0.5 * n_decode
            kv_d = float(np.add.reduce(kv_tokens))
        else:
            prefill = q > 1  # sequences bringing no token this step cost nothing
            qp = q[prefill]
            pairs_p = float(np.add.reduce(qp * (c[prefill] + 0.5 * qp)))
            prefill_s = self._attention_s(pairs_p, float(np.add.reduce(kv_tokens[prefill])), float(np.add.reduce(qp)),
                                          self.kv_bw, self.prefill_pair_s)
            if self.prefill_ratio is not None:
                prefill_s *= float(self.prefill_ratio.factor(pairs_p))
            if self.mla_context:
                prefill_s += self._mla_context_s(int(np.add.reduce(c[prefill])))
            pairs_d = float(np.add.reduce(c[decode])) + 0.5 * n_decode
            kv_d = float(np.add.reduce(kv_tokens[decode]))
        decode_s = self._attention_s(pairs_d, kv_d, n_decode, self.kv_bw)
        if self.decode_ratio is not None and n_decode:
            decode_s *= float(self.decode_ratio.factor(kv_d))
        if self.window is not None:
            sums = window_sums(q, c, self.window)
            return self._with_window((n_tokens, prefill_s, n_decode, decode_s), sums, float(np.add.reduce(q[q > 1])))
        return n_tokens, prefill_s, n_decode, decode_s

    def verify_parts(self, new_tokens: np.ndarray, cached_tokens: np.ndarray,
                     decode_max: int) -> tuple[int, float, int, float]:
        """`step_parts` of a speculative step on an MLA model: sequences bringing up to `decode_max`
        tokens take the absorbed decode kernel (`CostModel.decode_query_max`), each reading its KV
        once for all its query tokens; only longer ones are prefills that re-expand their context."""
        q, c = new_tokens, cached_tokens
        load = attention_load(q, c, self.block_size, decode_max)
        tokens_p, tokens_d = float(load.prefill_tokens[0]), float(load.decode_tokens[0])
        prefill_s = decode_s = 0.0
        if tokens_p:
            pairs_p = float(load.prefill_pairs[0])
            prefill_s = self._attention_s(pairs_p, float(load.prefill_kv_tokens[0]), tokens_p, self.kv_bw,
                                          self.prefill_pair_s)
            if self.prefill_ratio is not None:
                prefill_s *= float(self.prefill_ratio.factor(pairs_p))
            prefill_s += self._mla_context_s(int(np.add.reduce(c[q > decode_max])))
        if tokens_d:
            kv_d = float(load.decode_kv_tokens[0])
            decode_s = self._attention_s(float(load.decode_context[0]), kv_d, tokens_d, self.kv_bw)
            if self.decode_ratio is not None:
                decode_s *= float(self.decode_ratio.factor(kv_d))
        n_tokens, n_decode = int(np.add.reduce(q)), int(np.count_nonzero((q >= 1) & (q <= decode_max)))
        if self.window is not None:
            sums = window_sums(q, c, self.window)
            return self._with_window((n_tokens, prefill_s, n_decode, decode_s), sums, float(np.add.reduce(q[q > 1])))
        return n_tokens, prefill_s, n_decode, decode_s

    def step_parts_scalar(self, new_tokens: list[int], cached_tokens: list[int]) -> tuple[int, float, int, float]:
        """`step_parts` in plain Python (same values bit for bit)."""
        size = self.block_size
        n_tokens = n_decode = context_d = kv_d = kv_p = tokens_p = context_p = 0
        pairs_p = 0.0
        for q, c in zip(new_tokens, cached_tokens):
            n_tokens += q
            if q == 1:
                n_decode += 1
                context_d += c
                kv_d += -(-(c + 1) // size) * size
            elif q > 1:
                pairs_p += q * (c + 0.5 * q)
                kv_p += -(-(c + q) // size) * size
                tokens_p += q
                context_p += c
        prefill_s = (self._attention_s(pairs_p, float(kv_p), float(tokens_p), self.kv_bw, self.prefill_pair_s)
                     if tokens_p else 0.0)
        if self.prefill_ratio is not None and tokens_p:
            prefill_s *= float(self.prefill_ratio.factor(pairs_p))
        if self.mla_context and tokens_p:
            prefill_s += self._mla_context_s(context_p)
        decode_s = self._attention_s(float(context_d) + 0.5 * n_decode, float(kv_d), n_decode, self.kv_bw)
        if self.decode_ratio is not None and n_decode:
            decode_s *= float(self.decode_ratio.factor(float(kv_d)))
        if self.window is not None:
            sums = window_sums_scalar(new_tokens, cached_tokens, self.window)
            return self._with_window((n_tokens, prefill_s, n_decode, decode_s), sums, float(tokens_p))
        return n_tokens, prefill_s, n_decode, decode_s

    def decode_steps_until(self, contexts: np.ndarray | list[int], n_steps: int, start_s: float, horizon_s: float,
                           max_steps: int) -> tuple[list[float], list[int]] | None:
        """`decode_run` in plain Python for a few sequences, stopping after the step during which
        `horizon_s` falls (steps start at `start_s`): (times, KV tokens in whole blocks) of at most
        `n_steps` steps. None when a measured decode table applies or more than `max_steps` steps
        would be needed (the caller takes the array path). `decode_steps_past_finishes` with
        nobody leaving before n_steps."""
        if not len(contexts):
            return None
        if isinstance(contexts, np.ndarray):
            contexts = contexts.tolist()
        run = decode_steps_past_finishes(self, contexts, [n_steps] * len(contexts), start_s, horizon_s,
                                         min(n_steps, max_steps), math.inf)
        if run is None or (n_steps > max_steps and not run.reached_horizon):
            return None
        return run.times_s, run.kv_tokens

    def decode_run(self, contexts: np.ndarray, n_steps: int) -> tuple[np.ndarray, np.ndarray]:
        """(times, KV tokens in whole blocks) of n_steps consecutive decode steps in which each
        sequence gains one token; the second array is what the block pool holds at each step.

        Every array operation here costs ~0.5 us whatever its length and a replay makes tens of
        thousands of runs of ~10 steps, so the formulas are arranged to take few operations;
        the values are those of `_blend` over the same quantities, bit for bit (integer-valued
        floats are exact, and x / x == 1 and 1 ** p == 1 exactly)."""
        n = contexts.shape[0]
        if n == 0:
            return np.full(n_steps, self.overhead_s), np.zeros(n_steps)
        total = int(np.add.reduce(contexts))
        kv_tokens = whole_block_tokens_per_step(contexts, n_steps, self.block_size, total)
        t_memory = kv_tokens * self.kv_token_bytes
        t_memory += n * self.io_token_bytes
        t_memory /= self.kv_bw
        last_compute_s = (float(total) + n * (n_steps - 0.5)) * self.pair_s
        if last_compute_s < t_memory[0] * self.negligible_ratio:  # memory-bound at every step (see __init__)
            attention = t_memory
        elif math.isinf(self.p):
            t_compute = (float(total) + n * half_steps(n_steps)) * self.pair_s  # pairs: sum_j (c_j + s + 0.5)
            attention = np.maximum(t_compute, t_memory)
        else:  # top * ((t_c / top) ** p + (t_m / top) ** p) ** (1 / p), one of the two ratios being 1
            t_compute = (float(total) + n * half_steps(n_steps)) * self.pair_s
            top = np.maximum(t_compute, t_memory)
            ratio = np.minimum(t_compute, t_memory, out=t_compute)
            ratio /= top
            ratio **= self.p
            ratio += 1.0
            ratio **= 1.0 / self.p
            attention = np.multiply(top, ratio, out=top)
        attention += self.launch_s
        if self.decode_ratio is not None:  # a measured decode-attention table scales the smooth model
            attention *= self.decode_ratio.factor(kv_tokens)
        if self.window is not None:
            pairs_w, kv_w = decode_run_sums(contexts, n_steps, self.window)
            attention += np.array([self._window_s(p, kv, n, False) for p, kv in zip(pairs_w.tolist(), kv_w.tolist())])
        fixed_s = self.n_layers * self.cost.layer_time_s(n) + self.cost.lm_head_time_s(n) + self.overhead_s
        attention *= self.n_layers
        attention += fixed_s
        return attention, kv_tokens
