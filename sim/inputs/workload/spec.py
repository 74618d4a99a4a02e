"""Workload spec YAMLs: validate (pydantic), then build the Trace or ClosedLoop they describe.

    trace: splitwise_conv             # bundled name, or a path relative to this file
    transforms: {time_window_s: [0, 600], rate_scale: 2.0, clip_max_model_len: 8192}
    seed: 1

or a `synthetic:` block (see spec_models.Synthetic and the examples in workloads/).
A trace with an `arrival:` block is re-timed by that process (length-only traces need
one unless the default Poisson at 1 req/s will do); `closed_loop` makes it a pool.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import ValidationError

from sim.errors import InputError
from sim.inputs.workload.bench import closed_loop
from sim.inputs.workload.read_trace import load_trace
from sim.inputs.workload.spec_models import Transforms, WorkloadSpec
from sim.inputs.workload.synthetic.arrivals import arrival_times_s
from sim.inputs.workload.synthetic.generate import generate_synthetic
from sim.inputs.workload.trace import ClosedLoop, Trace
from sim.inputs.workload.transforms import apply_transforms
from sim.yamlio import MAPPING_ERRORS, parse_yaml, read_text_bounded


def _first_error(path: Path, error: ValidationError) -> InputError:
    """The first pydantic error as one InputError line: file, dotted key path, message."""
    detail = error.errors()[0]
    field = ".".join(str(part) for part in detail["loc"]) or None
    message = detail["msg"].removeprefix("Value error, ")
    if detail["type"] in MAPPING_ERRORS:
        message = f"must be a mapping of keys to values (got {detail.get('input')!r:.60})"
    elif detail["type"] == "extra_forbidden":
        message = "unknown key (not part of the workload spec schema)"
    elif detail["type"] == "union_tag_invalid":
        message = f"unknown kind {detail['input'].get('kind')!r}; {detail['ctx']['expected_tags']}"
    return InputError(str(path), field, message)


def read_spec(path: Path) -> WorkloadSpec:
    """Parse and validate a spec file; any problem is an InputError naming file and key."""
    document = parse_yaml(read_text_bounded(path), path)
    if not isinstance(document, dict):
        raise InputError(
            str(path), None, "a workload spec is a YAML mapping with `trace` or `synthetic`"
        )
    try:
        return WorkloadSpec.model_validate(document)
    except ValidationError as error:
        raise _first_error(path, error) from None


def _transform(trace: Trace, transforms: Transforms, seed: int, where: str) -> Trace:
    try:
        return apply_transforms(
            trace,
            time_window_s=transforms.time_window_s,
            sample_n=transforms.sample_n,
            shuffle_seed=transforms.shuffle_seed,
            rate_scale=transforms.rate_scale,
            target_qps=transforms.target_qps,
            clip_max_model_len_tokens=transforms.clip_max_model_len,
            seed=seed,
        )
    except InputError as error:
        raise InputError(where, f"transforms.{error.where}", error.allowed) from None


def _trace_workload(spec: WorkloadSpec, path: Path, seed: int, strict: bool) -> Trace | ClosedLoop:
    source = spec.trace
    if (path.parent / source).is_file():
        source = str(path.parent / source)
    trace = load_trace(
        source,
        spec.format,
        strict=strict,
        seed=seed,
        keep_failed=spec.keep_failed,
        columns=spec.columns,
        time_unit=spec.time_unit,
    )
    arrival = spec.arrival
    if arrival is not None and arrival.kind != "closed_loop":
        rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(2)[1])
        trace.arrival_s = arrival_times_s(
            rng, arrival.kind, arrival.rate_qps, cv=getattr(arrival, "cv", 1.0), n=len(trace)
        )
    trace = _transform(trace, spec.transforms, seed, str(path))
    if arrival is not None and arrival.kind == "closed_loop":
        return closed_loop(trace, arrival, seed)
    return trace


def workload_from_spec(
    path: Path, *, strict: bool = False, seed: int | None = None, n_requests: int | None = None
) -> Trace | ClosedLoop:
    """Build the workload a spec file describes. `seed` (when not None) overrides the spec's;
    `n_requests` (synthetic specs) draws that many requests of the same process instead of the
    spec's count or duration. A synthetic trace carries its `redraw` (SpecRedraw)."""
    spec = read_spec(path)
    seed = seed if seed is not None else (spec.seed if spec.seed is not None else 0)
    if spec.trace is not None:
        return _trace_workload(spec, path, seed, strict)
    synthetic = spec.synthetic
    if n_requests is not None:
        synthetic = synthetic.model_copy(update={"n_requests": n_requests, "duration_s": None})
    workload = generate_synthetic(synthetic, seed, base_dir=path.parent, where=str(path))
    if isinstance(workload, ClosedLoop):
        if (
            spec.transforms.time_window_s
            or spec.transforms.rate_scale
            or spec.transforms.target_qps
        ):
            raise InputError(
                str(path), "transforms", "a closed loop has no time to window or scale"
            )
        workload.pool = _transform(workload.pool, spec.transforms, seed, str(path))
        return workload
    trace = _transform(workload, spec.transforms, seed, str(path))
    trace.redraw = SpecRedraw(path, seed, strict)
    return trace


@dataclass(frozen=True)
class SpecRedraw:
    """The same synthetic workload drawn longer: `n_requests` requests of the spec's own process (fresh
    arrivals and lengths from its seed), for a steady-state check that needs more traffic than the spec
    holds (sim.inputs.workload.transforms.extend). A dataclass, not a closure, so plan workers can
    receive it."""

    path: Path
    seed: int
    strict: bool

    def __call__(self, n_requests: int) -> Trace:
        return workload_from_spec(self.path, strict=self.strict, seed=self.seed, n_requests=n_requests)
