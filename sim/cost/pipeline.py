"""Pipeline parallelism: a replica of pp stages, each a TP group holding ceil(n_layers / pp) layers.

**Scheduling model** (vLLM V1's PP: the engine keeps up to pp batches in flight, one per stage,
and schedules a new batch from the requests not in flight; SGLang's PP event loop likewise keeps
pp micro-batches in flight). A simulated step is one token for every running sequence. Its
sequences are dealt round-robin into m = min(pp, n_seqs) micro-batches (in flight at once); each
micro-batch k passes every stage once per step. With

    F_k  the forward pass of micro-batch k over all layers and the LM head (the TP cost model),
    s_k  its time on the busiest stage: ceil(L / pp) / L of its layer time + the LM head (last stage),
    x_k  the activations it sends across each of the pp-1 stage boundaries,

the step lasts  max(sum_k s_k, max_k (F_k + sum_b send_b(x_k)))  + the step constant: the
busiest stage must work through every micro-batch, and every micro-batch must travel the whole
pipeline (its layers in sequence, each hop's send). The gap between the two is shown as two ops:
`pp_send_recv` (hops not hidden behind other micro-batches' work) and `pp_bubble` (stages idle
because fewer micro-batches than stages are in flight: a lone prefill on pp stages idles
(pp-1) / pp of the GPUs).

Consequences: with at least pp sequences in flight a step costs about one forward pass of a
1/pp batch (throughput of pp times fewer layers per GPU); a request's token still waits for the
whole pipeline (latency: all layers plus pp-1 hops); a decode step that is weight-read-bound
reads each stage's weights once per micro-batch, so it costs about what the same batch costs
on one stage's GPUs holding all layers. Micro-batches are equal shares of the step's sequences
(round-robin); stage imbalance beyond the LM head (embedding, uneven layer counts) is not
modelled except through ceil(L / pp).

**Send/recv**: each hop carries the hidden states and the residual (vLLM's intermediate tensors
between stages, `hidden_states` and `residual`) of every token of the micro-batch, split over the
stage's TP ranks (each rank sends 1/tp and the receiving ranks all-gather; the all-gather is
not priced). A hop inside the scale-up domain is priced by the profile's `collectives.send_recv`
fit (else NVLink at `gpu_link_gb_s`), one that leaves it by the scale-out NIC
(sim/cost/topology.py).
"""

from __future__ import annotations

import numpy as np

from sim.cost.collectives import link_time_s
from sim.cost.model import CostModel
from sim.cost.step_cost import OpCost, StepCost
from sim.cost.topology import network_link, stage_boundaries_cross
from sim.errors import InputError
from sim.inputs.hardware import LinkFit
from sim.inputs.layout.parallel import ReplicaLayout

PP_TENSORS_PER_TOKEN = 2  # hidden_states and residual per token (vLLM IntermediateTensors of Llama-style models)


class PipelineCostModel(CostModel):
    """`CostModel` of one pipeline stage's TP group, stepped as `pp` stages (module docstring).
    Its type is not `CostModel`, so schedulers take the generic step paths."""

    def __init__(self, *args, pp: int, **kwargs):
        super().__init__(*args, **kwargs)
        layout = ReplicaLayout(tp=self.tp, pp=pp).check(self.model.n_layers, self.model.moe is not None)
        hw, tp = self.hw, self.tp
        domain = hw.scale_up_gpus
        if tp < domain and domain % tp and tp * pp > domain:
            raise InputError("--tp", None, f"pipeline stages of tp {tp} GPUs do not tile {hw.name}'s {domain}-GPU "
                             "domains: give a tp that divides the domain")
        self.pp = pp
        self.stage_share = layout.stage_layers(self.model.n_layers) / self.model.n_layers
        self.hop_links = [self._hop_link(crosses) for crosses in stage_boundaries_cross(hw, tp, pp)]
        self.hop_kinds = ["network" if crosses else "nvlink" for crosses in stage_boundaries_cross(hw, tp, pp)]
        self.hop_bytes_per_token = PP_TENSORS_PER_TOKEN * self.model.hidden_size * self.act_bytes_el / tp

    def _hop_link(self, crosses_domain: bool) -> LinkFit:
        if crosses_domain:
            bytes_s, latency_s = network_link(self.hw, f"a pipeline hop (tp {self.tp} x pp)")
            return LinkFit(latency_us=latency_s * 1e6, bus_gb_s=bytes_s / 1e9)
        fit = self.hw.collectives.send_recv if self.hw.collectives is not None else None
        return fit or LinkFit(latency_us=self.hw.interconnect.gpu_link_latency_us,
                              bus_gb_s=self.hw.interconnect.gpu_link_gb_s)

    def _hops_s(self, tokens: np.ndarray) -> np.ndarray:
        """Time of one micro-batch of `tokens` tokens across all pp-1 boundaries (per step)."""
        payload = np.asarray(tokens, dtype=np.float64) * self.hop_bytes_per_token
        total = np.zeros_like(payload)
        for fit in self.hop_links:
            total = total + link_time_s(payload, fit) * self.time_scale["collective"]
        return total

    def _pipeline_s(self, forward_s: np.ndarray, lm_s: np.ndarray, tokens: np.ndarray) -> tuple:
        """(busiest-stage work, exposed hops, bubble) of micro-batches along axis 0 (module docstring)."""
        stage_s = self.stage_share * (forward_s - lm_s) + lm_s
        traversal_s = forward_s + self._hops_s(tokens)
        busy_s = stage_s.sum(axis=0)
        exposed_s = np.maximum(traversal_s.max(axis=0) - busy_s, 0.0)
        hops_s = np.minimum(exposed_s, self._hops_s(tokens).max(axis=0))
        return busy_s, hops_s, exposed_s - hops_s

    # ---------------------------------------------------------------- micro-batches
    def _split(self, n_seqs: int, n_sampled: int) -> list[tuple[slice, int]]:
        """Round-robin micro-batches: (sequence slice with step m, sequences sampled) each."""
        m = max(1, min(self.pp, n_seqs))
        return [(slice(k, None, m), n_sampled // m + (k < n_sampled % m)) for k in range(m)]

    def step_time_s(self, new_tokens: np.ndarray, cached_tokens: np.ndarray, n_sampled: int) -> float:
        q, c = np.asarray(new_tokens, dtype=np.int64), np.asarray(cached_tokens, dtype=np.int64)
        forward, lm, tokens = [], [], []
        for part, sampled in self._split(q.shape[0], int(n_sampled)):
            forward.append(super().step_time_s(q[part], c[part], sampled) - self.overhead_s)
            lm.append(self.lm_head_time_s(sampled))
            tokens.append(float(q[part].sum()))
        busy, hops, bubble = self._pipeline_s(np.array(forward), np.array(lm), np.array(tokens))
        return float(busy + hops + bubble) + self.overhead_s

    def decode_run(self, contexts: np.ndarray, n_steps: int) -> tuple[np.ndarray, np.ndarray]:
        contexts = np.asarray(contexts, dtype=np.int64)
        if contexts.shape[0] == 0:
            return super().decode_run(contexts, n_steps)
        forward, lm, tokens, kv = [], [], [], 0.0
        for part, sampled in self._split(contexts.shape[0], contexts.shape[0]):
            times, kv_tokens = super().decode_run(contexts[part], n_steps)
            forward.append(times - self.overhead_s)
            lm.append(np.full(n_steps, self.lm_head_time_s(sampled)))
            tokens.append(np.full(n_steps, float(sampled)))
            kv = kv + kv_tokens
        busy, hops, bubble = self._pipeline_s(np.array(forward), np.array(lm), np.array(tokens))
        return busy + hops + bubble + self.overhead_s, kv

    def decode_run_times_s(self, contexts: np.ndarray, n_steps: int) -> np.ndarray:
        return self.decode_run(contexts, n_steps)[0]

    # ---------------------------------------------------------------- for people
    def breakdown(self, new_tokens, cached_tokens, n_sampled: int | None = None) -> StepCost:
        """The busiest stage's ops summed over the step's micro-batches (per-layer ops scaled to its
        share of the layers), then `pp_send_recv` and `pp_bubble`; time_s equals step_time_s."""
        q = np.atleast_1d(np.asarray(new_tokens, dtype=np.int64))
        c = np.atleast_1d(np.asarray(cached_tokens, dtype=np.int64))
        sampled_all = len(q) if n_sampled is None else n_sampled
        sums: dict[str, list] = {}
        forward, lm, tokens = [], [], []
        for part, sampled in self._split(len(q), sampled_all):
            step = super().breakdown(q[part], c[part], sampled)
            for op in step.ops:
                share = self.stage_share if op.per_layer else 1.0
                entry = sums.setdefault(op.name, [0.0, 0.0, 0.0, op.bound, op.per_layer])
                entry[0] += op.time_s * share
                entry[1] += op.flops * share
                entry[2] += op.bytes * share
            forward.append(step.time_s - step.overhead_s)
            lm.append(sum(op.time_s for op in step.ops if not op.per_layer))
            tokens.append(float(q[part].sum()))
        ops = [OpCost(name, t, f, b, bound, per_layer) for name, (t, f, b, bound, per_layer) in sums.items()]
        _, hops, bubble = self._pipeline_s(np.array(forward), np.array(lm), np.array(tokens))
        hop_bytes = max(tokens) * self.hop_bytes_per_token * len(self.hop_links)
        ops.append(OpCost("pp_send_recv", float(hops), 0.0, hop_bytes, "network", False))
        ops.append(OpCost("pp_bubble", float(bubble), 0.0, 0.0, "bubble", False))
        return StepCost(ops=ops, n_layers=self.model.n_layers, overhead_s=self.overhead_s)
