"""A replica's parallel layout: TP x PP, expert parallelism (EP) and data-parallel attention (DP).

Names follow the engines:
- `tp`: GPUs of one tensor-parallel group (vLLM `--tensor-parallel-size`, SGLang `--tp`).
- `pp`: pipeline stages (vLLM `--pipeline-parallel-size`, SGLang `--pp-size`); each stage is a
  TP group holding ceil(n_layers / pp) layers and those layers' KV (sim/cost/pipeline.py).
- `dp`: attention data-parallel ranks. Two engines, two meanings of the same number:
  * SGLang `--tp T --dp D --enable-dp-attention`: the replica is T GPUs; attention runs as D
    ranks of T / D GPUs each, every rank with its own requests and its own KV; MoE layers span
    all T GPUs. (`enable_dp_attention: true`)
  * vLLM `--data-parallel-size D --tensor-parallel-size T --enable-expert-parallel`: the replica
    is D x T GPUs; attention runs as D ranks of T GPUs each, MoE layers expert-parallel over all
    D x T. (`enable_dp_attention: false`, `enable_expert_parallel: true`)
- `ep`: expert-parallel size, the GPUs the routed experts are sharded over (SGLang `--ep-size`;
  vLLM's `--enable-expert-parallel` sets it to the MoE layers' whole group, dp x tp). None:
  experts follow TP (no expert parallelism), or the whole MoE group when enable_expert_parallel.
- `n_redundant_experts`: extra physical expert slots for load balancing (SGLang
  `--ep-num-redundant-experts`, vLLM `--num-redundant-experts`): the n routed experts occupy
  n + r slots, (n + r) / ep per EP GPU, the most loaded experts replicated (EPLB). Needs EP.

Dense models have no experts to shard: EP and DP-attention on them are refused in one line
(replicas of a dense model are `--replicas`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sim.errors import InputError


@dataclass(frozen=True)
class ReplicaLayout:
    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int | None = None
    enable_dp_attention: bool = False
    enable_expert_parallel: bool = False
    n_redundant_experts: int = 0

    @property
    def n_gpus_per_stage(self) -> int:
        """GPUs of one pipeline stage: tp (SGLang DP-attention inside it) or dp x tp (vLLM DP)."""
        return self.tp if self.enable_dp_attention else self.dp * self.tp

    @property
    def n_gpus(self) -> int:
        return self.n_gpus_per_stage * self.pp

    @property
    def attention_tp(self) -> int:
        """GPUs of one attention rank's TP group."""
        return self.tp // self.dp if self.enable_dp_attention else self.tp

    @property
    def n_kv_ranks(self) -> int:
        """Attention ranks per stage, each with its own requests and its own KV cache."""
        return self.dp

    @property
    def moe_group(self) -> int:
        """GPUs a MoE layer spans (per stage)."""
        return self.n_gpus_per_stage

    @property
    def expert_parallel_size(self) -> int:
        """GPUs the routed experts are sharded over: `ep`, else the whole MoE group under
        enable_expert_parallel, else 1 (experts split by TP like a dense MLP)."""
        if self.ep is not None:
            return self.ep
        return self.moe_group if self.enable_expert_parallel else 1

    @property
    def uses_expert_parallel(self) -> bool:
        return self.expert_parallel_size > 1

    @property
    def is_dense_tp_pp(self) -> bool:
        """Only TP and PP: what the cost model prices today."""
        return self.dp == 1 and not self.uses_expert_parallel and not self.enable_dp_attention

    def physical_experts(self, n_experts: int) -> int:
        """Expert slots of one MoE layer: the routed experts plus the redundant copies."""
        return n_experts + self.n_redundant_experts

    def stage_layers(self, n_layers: int) -> int:
        """Layers on the busiest stage (vLLM spreads the remainder over some stages)."""
        return math.ceil(n_layers / self.pp)

    def check(self, n_layers: int, is_moe: bool, n_experts: int | None = None) -> ReplicaLayout:
        """Refuse a layout the model cannot take, in one line naming the flag; returns self."""
        if self.pp > n_layers:
            raise InputError("--pp", None,
                             f"at most the model's {n_layers} layers (one layer per stage); got {self.pp}")
        wants_moe_split = self.dp > 1 or self.enable_dp_attention or self.enable_expert_parallel or (
            self.ep is not None and self.ep > 1)
        if wants_moe_split and not is_moe:
            flag = "--ep" if self.ep or self.enable_expert_parallel else "--dp"
            raise InputError(flag, None, "a dense model has no experts to shard: expert and data-parallel attention "
                             "layouts need a MoE model (more copies of a dense model: --replicas)")
        if self.enable_dp_attention and (self.dp < 2 or self.tp % self.dp):
            raise InputError("--dp", None, f"with --enable-dp-attention, 2 or more ranks dividing --tp {self.tp} "
                             f"(SGLang: each rank gets tp / dp GPUs); got {self.dp}")
        if self.dp > 1 and not self.enable_dp_attention and not self.uses_expert_parallel:
            raise InputError("--dp", None, "data-parallel ranks of a MoE replica share its experts: give "
                             "--enable-expert-parallel (vLLM) or --enable-dp-attention (SGLang)")
        ep = self.expert_parallel_size
        if ep > 1 and self.moe_group % ep:
            raise InputError("--ep", None, f"must divide the {self.moe_group} GPUs of a MoE layer (tp x dp); got {ep}")
        if self.n_redundant_experts and ep == 1:
            raise InputError("--ep-num-redundant-experts", None, "redundant experts are copies spread over "
                             "expert-parallel GPUs: needs --ep (or --enable-expert-parallel) on a MoE model")
        if ep > 1 and n_experts is not None and self.physical_experts(n_experts) % ep:
            if self.n_redundant_experts:
                slots = (f"{n_experts} routed + {self.n_redundant_experts} redundant experts "
                         f"({self.physical_experts(n_experts)} slots)")
            else:
                slots = f"{n_experts} routed experts"
            hint = "" if self.n_redundant_experts else " (redundant experts, --ep-num-redundant-experts, can add slots)"
            raise InputError("--ep", None, f"must divide the model's {slots}; got {ep}{hint}")
        return self
