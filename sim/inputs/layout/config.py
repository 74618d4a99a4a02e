"""Config knobs of a replica's parallel layout beyond TP (sim/inputs/layout/parallel.py), under the engines' names.

YAML keys: `pp` (also `pipeline_parallel_size`, vLLM; `pp_size`, SGLang), `dp` (also
`data_parallel_size`, vLLM; `dp_size`, SGLang), `ep` (also `expert_parallel_size`; `ep_size`,
SGLang), `enable_expert_parallel` (vLLM), `enable_dp_attention` (SGLang), `nodes` (the scale-up
domains the cluster has; None: as many as the replicas need); the MoE all-to-all: `moe_a2a_backend`
(`nccl` | `deepep`, SGLang's `--moe-a2a-backend`; `allgather_reducescatter`, vLLM's all2all backend of that
name and TensorRT-LLM's attention-DP MoE without MNNVL), `deepep_mode` (`auto` | `normal` | `low_latency`,
SGLang's `--deepep-mode`), `moe_load_imbalance` (max / mean tokens per EP GPU; None: the model's,
1.0), `enable_two_batch_overlap` (SGLang's), `ep_num_redundant_experts` (SGLang's
`--ep-num-redundant-experts`; vLLM's `num_redundant_experts`). `EngineConfig` inherits them
(sim/cost/expert_parallel.py).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveInt, model_validator

from sim.inputs.layout.parallel import ReplicaLayout
from sim.schema import StrictModel

MAX_PP = 256  # pipeline stages of one replica
MAX_DP = 1024  # attention data-parallel ranks of one replica
MAX_NODES = 100_000
MAX_REDUNDANT_EXPERTS = 4096

ENGINE_KEY_NAMES = {
    "pipeline_parallel_size": "pp", "pp_size": "pp",
    "data_parallel_size": "dp", "dp_size": "dp",
    "expert_parallel_size": "ep", "ep_size": "ep",
    "num_redundant_experts": "ep_num_redundant_experts",  # vLLM's name; SGLang's is the key
}


def engine_names_to_keys(data: dict) -> dict:
    """`pipeline_parallel_size: 2` -> `pp: 2` (and the other engine spellings); the same knob
    given twice under two names is refused."""
    out = dict(data)
    for engine_key, key in ENGINE_KEY_NAMES.items():
        if engine_key in out:
            if key in out and out[key] != out[engine_key]:
                raise ValueError(f"{engine_key} and {key} name the same knob: give one")
            out[key] = out.pop(engine_key)
    return out


class LayoutKnobs(StrictModel):
    pp: PositiveInt = Field(1, le=MAX_PP)
    dp: PositiveInt = Field(1, le=MAX_DP)
    ep: PositiveInt | None = None
    enable_expert_parallel: bool = False
    enable_dp_attention: bool = False
    nodes: PositiveInt | None = Field(None, le=MAX_NODES)
    moe_a2a_backend: Literal["nccl", "deepep", "allgather_reducescatter"] = "nccl"
    deepep_mode: Literal["auto", "normal", "low_latency"] = "auto"
    moe_load_imbalance: float | None = Field(None, ge=1.0, le=64.0)
    enable_two_batch_overlap: bool = False
    ep_num_redundant_experts: int = Field(0, ge=0, le=MAX_REDUNDANT_EXPERTS)

    @model_validator(mode="before")
    @classmethod
    def _engine_key_names(cls, data):
        return engine_names_to_keys(data) if isinstance(data, dict) else data

    def layout(self) -> ReplicaLayout:
        """The replica layout of these knobs and the config's `tp`."""
        return ReplicaLayout(tp=self.tp, pp=self.pp, dp=self.dp, ep=self.ep,  # type: ignore[attr-defined]
                             enable_dp_attention=self.enable_dp_attention,
                             enable_expert_parallel=self.enable_expert_parallel,
                             n_redundant_experts=self.ep_num_redundant_experts)


GROUP_LAYOUT_KNOBS = ("tp", "pp", "dp", "ep", "enable_dp_attention", "enable_expert_parallel",
                      "ep_num_redundant_experts")


def group_layout(cfg, role: str) -> ReplicaLayout:
    """The layout of one replica of a disaggregated cluster's `role` group ("prefill" | "decode"):
    the run's layout knobs with the group's own (`cfg.prefill` / `cfg.decode`) on top."""
    own = getattr(cfg, role).model_dump(exclude_none=True)
    return cfg.model_copy(update={k: own[k] for k in GROUP_LAYOUT_KNOBS if k in own}).layout()
