"""Sweep grids: parse `--grid key=v1,v2`, expand the cartesian product over a base, name each point.

A point is one simulation: a full `EngineConfig` plus the workload it replays. Its `point_id` is a
hash of that whole normalized description (not only the grid values), so a re-run with the same
base and grid finds its finished points again, and a changed base never reuses stale results.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import yaml
from pydantic import ConfigDict, Field, PositiveFloat, model_validator

from sim.errors import InputError
from sim.inputs.budget import MAX_ROWS
from sim.inputs.config import EngineConfig
from sim.inputs.engines.default import engine_or_default, with_default_engine
from sim.schema import MAX_RATE_QPS, StrictModel
from sim.yamlio import load_yaml, read_mapping, validate

# workload knobs a grid may vary: qps = Poisson arrivals at that rate (as simulate --qps and vLLM's
# --request-rate); trace_qps = the trace's own arrival shape re-timed to that mean (bursts kept, as plan)
GRID_WORKLOAD_KEYS = ("trace_qps", "qps", "rate_scale")
BASE_WORKLOAD_KEYS = ("trace", "format", "max_requests", *GRID_WORKLOAD_KEYS)
NOT_SWEEPABLE = ("slo",)  # nested: set it in the base YAML


class WorkloadParams(StrictModel):
    """What one point replays: a trace (path or bundled name), cut to `max_requests`, then given
    Poisson arrivals at `qps` req/s, or re-timed to a mean of `trace_qps` req/s keeping its shape,
    or sped up `rate_scale` times (at most one of the three)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    trace: str | None = None
    format: str | None = None
    max_requests: Annotated[int, Field(ge=1, le=MAX_ROWS)] | None = None
    qps: Annotated[float, Field(gt=0, le=MAX_RATE_QPS)] | None = None
    rate_scale: PositiveFloat | None = None
    trace_qps: Annotated[float, Field(gt=0, le=MAX_RATE_QPS)] | None = None

    @model_validator(mode="after")
    def _one_rate_knob(self) -> WorkloadParams:
        if sum(v is not None for v in (self.qps, self.rate_scale, self.trace_qps)) > 1:
            raise ValueError("give at most one of qps (Poisson), trace_qps (the trace's shape) and rate_scale")
        return self


@dataclass(frozen=True)
class SweepPoint:
    point_id: str
    grid_values: dict  # the values this point takes for the grid keys, in grid order
    config: dict  # EngineConfig.model_dump(mode="json")
    workload: dict  # WorkloadParams.model_dump(mode="json")


def sweepable_keys() -> list[str]:
    engine_keys = [k for k in EngineConfig.model_fields if k not in NOT_SWEEPABLE]
    return sorted(engine_keys) + list(GRID_WORKLOAD_KEYS)


def parse_grid(options: list[str]) -> dict[str, list]:
    """`["max_num_seqs=32,64", "policy=chunked,radix"]` -> {"max_num_seqs": [32, 64], ...}.

    Values are YAML scalars (`32` int, `0.9` float, `true` bool, `null` None, else text); pydantic
    checks them later, per point. Raises InputError for a malformed option, an unknown or repeated
    key, an empty value, or a value listed twice."""
    if not options:
        raise InputError("--grid", None, "give at least one --grid key=v1,v2,...")
    grid: dict[str, list] = {}
    for option in options:
        key, values = _parse_grid_option(option)
        if key in grid:
            raise InputError("--grid", key, "given twice; list all its values in one --grid")
        grid[key] = values
    return grid


def _parse_grid_option(option: str, flag: str = "--grid") -> tuple[str, list]:
    """`key=v1,v2` as (key, values); errors name `flag` (plan's --search parses the same way)."""
    key, sep, listing = option.partition("=")
    key = key.strip()
    if not sep or not key:
        raise InputError(flag, None, f"{option!r} is not key=v1,v2,... (e.g. max_num_seqs=32,64)")
    allowed = sweepable_keys()
    if key not in allowed:
        raise InputError(flag, key, f"unknown parameter; one of {', '.join(allowed)}")
    texts = [t.strip() for t in listing.split(",")]
    if any(not t for t in texts):
        raise InputError(flag, key, f"empty value in {listing!r}; give v1,v2,... with no blanks")
    values = [_scalar(key, t, flag) for t in texts]
    if len({json.dumps(v) for v in values}) != len(values):
        raise InputError(flag, key, f"a value is listed twice in {listing!r}")
    return key, values


def _scalar(key: str, text: str, flag: str = "--grid"):
    try:
        value = load_yaml(text)
    except yaml.YAMLError:
        value = text
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise InputError(flag, key, f"{text!r} is not a single value (a number, true/false, null or a name)")


def load_base(path: Path | None) -> tuple[dict, dict]:
    """The base YAML: EngineConfig keys plus the workload keys `trace`, `format`, `max_requests`,
    `qps`, `rate_scale`. Returns (engine dict, workload dict); both are validated here. Without an
    `engine` the sweep runs `plan`'s engine preset (sim/inputs/engines/default.py), so a sweep's best
    point and a plan price the same engine."""
    from sim.inputs.vllm_names import undash_keys  # vLLM-style dashed keys (max-num-seqs:) read as underscored

    data = undash_keys(read_mapping(path), path) if path is not None else {}
    data = with_default_engine(data)  # plan's engine preset unless the base names one (`engine: none`: generic)
    workload = {k: data.pop(k) for k in BASE_WORKLOAD_KEYS if k in data}
    where = path if path is not None else "--base"
    validate(EngineConfig, data, where)
    validate(WorkloadParams, workload, where)
    return data, workload


def expand(engine_base: dict, workload_base: dict, grid: dict[str, list]) -> list[SweepPoint]:
    """The cartesian product of `grid` over the base, in grid order (last key varies fastest).
    Every point is validated before anything runs: a bad value raises InputError naming its key."""
    points = []
    for combo in itertools.product(*grid.values()):
        values = dict(zip(grid, combo, strict=True))
        engine = dict(engine_base)
        workload = dict(workload_base)
        for key, value in values.items():
            (workload if key in GRID_WORKLOAD_KEYS else engine)[key] = value
        if "engine" in values:  # `--grid engine=none,vllm`: none is the generic engine
            engine["engine"] = engine_or_default(values["engine"])
        for key in GRID_WORKLOAD_KEYS:  # a rate knob on the grid replaces the base's other rate knobs
            if key in values:
                for other in GRID_WORKLOAD_KEYS:
                    if other != key:
                        workload.pop(other, None)
        config = validate(EngineConfig, engine, "--grid").model_dump(mode="json")
        params = validate(WorkloadParams, _normalize_trace(workload), "--grid").model_dump(mode="json")
        points.append(SweepPoint(point_id(config, params), values, config, params))
    return points


def _normalize_trace(workload: dict) -> dict:
    """A trace given as a file path is recorded absolute, so the point id does not depend on the cwd."""
    trace = workload.get("trace")
    if isinstance(trace, str) and Path(trace).is_file():
        return {**workload, "trace": str(Path(trace).resolve())}
    return workload


def point_id(config: dict, workload: dict) -> str:
    """16 hex digits of SHA-256 over the sorted JSON of the whole point: stable across runs and machines."""
    text = json.dumps({"config": config, "workload": workload}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
