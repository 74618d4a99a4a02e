"""A multi-model pool plan (`infersim pool plan FILE.yaml`, issue 35 item 8): several models, each with its
own workload, target rate and SLOs, served from ONE pool of one hardware profile.

Each model is planned as `infersim plan` plans one (`make_plan`: sized on its busiest slice, verified on
its whole workload, the cheapest verified cluster recommended), its candidates priced per GPU used
(the pool, not the model, pays for whole nodes); then every model's replicas are packed together onto
the pool's nodes and scale-up domains (sim/planner/pool_pack.py) and the pool is billed once, by the
pool's billing unit (sim/planner/billing.py): the GPUs used, the whole nodes, or the whole domains.
`separately` gives what the same replicas cost on nodes of their own per model.

```yaml
hardware: h100-sxm                 # one profile for the whole pool
price_usd_per_gpu_hour: 2.10       # optional: instead of the profile's cost_per_hour_usd
billing: node                      # optional: gpu | node | rack [the profile's `billing`]
tp: [1, 2, 4, 8]                   # optional: TP sizes to search per model
policy: [chunked]                  # optional: scheduler policies to search per model [the engine's, as plan]
max_requests: 300                  # optional: sizing slice per model
verify: true                       # optional: replay each model's whole workload
models:
  - {name: chat, model: llama-3-8b, workload: splitwise_conv, target_qps: 20,
     slo: {ttft_p99: 2s, tpot_p99: 100ms}, engine: {max_num_seqs: 128}}   # engine: EngineConfig keys
```
Every model runs the engine preset `plan` runs when its `engine:` mapping names none (`vllm`, the newest
vLLM preset: sim/inputs/engines/default.py; `engine: {engine: none}` the generic engine), and searches that
engine's default policy unless the entry or the pool names `policy`; each launch line says which engine and
version it was simulated with.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, PositiveFloat, PositiveInt, field_validator

from sim.errors import InputError
from sim.schema import Plausible, StrictModel
from sim.yamlio import read_mapping, validate

MAX_POOL_MODELS = 64


class PoolModel(StrictModel):
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")
    model: str
    workload: str
    workload_format: str | None = None
    target_qps: PositiveFloat
    slo: dict[str, str | float] = Field(min_length=1)  # {ttft_p99: 2s, tpot_p99: 100ms}: `--slo` keys and units
    min_finished: float = Field(0.99, gt=0, le=1)
    tp: list[PositiveInt] | None = Field(None, min_length=1)  # None: the pool's
    policy: list[Literal["static", "continuous", "chunked", "radix"]] | None = Field(None, min_length=1)
    engine: dict | None = None  # EngineConfig keys (engine, weight_dtype, max_num_seqs, ...), not model/hardware/tp


class PoolSpec(StrictModel):
    hardware: str
    price_usd_per_gpu_hour: Plausible("gpu_hour_usd") | None = None
    billing: Literal["gpu", "node", "rack"] | None = None
    tp: list[PositiveInt] = Field([1, 2, 4, 8], min_length=1)
    policy: list[Literal["static", "continuous", "chunked", "radix"]] | None = Field(None, min_length=1)  # None: plan's
    max_requests: PositiveInt = Field(300, le=100_000)
    verify: bool = True
    models: list[PoolModel] = Field(min_length=1, max_length=MAX_POOL_MODELS)

    @field_validator("models")
    @classmethod
    def _unique_names(cls, models: list[PoolModel]) -> list[PoolModel]:
        names = [m.name for m in models]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"model names must be unique; {twice[0]!r} is given twice")
        return models


ENGINE_KEYS_OWNED = ("model", "hardware", "tp", "policy", "replicas", "replica_hardware")


def load_pool_spec(path: Path) -> PoolSpec:
    """The pool YAML, validated (one-line InputError naming the file and field)."""
    spec = validate(PoolSpec, read_mapping(path), path)
    for i, entry in enumerate(spec.models):
        owned = sorted(set(entry.engine or {}) & set(ENGINE_KEYS_OWNED))
        if owned:
            raise InputError(path, f"models.{i}.engine.{owned[0]}", "set by the pool (hardware) or searched "
                                                                     "(tp, policy: the entry's own keys); drop it")
    return spec


def workload_of(entry: PoolModel, spec_dir: Path) -> str:
    """The entry's workload: a path relative to the pool YAML when one exists there, else as given."""
    local = spec_dir / entry.workload
    return str(local) if local.is_file() else entry.workload
