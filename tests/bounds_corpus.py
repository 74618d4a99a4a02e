"""Hostile-corpus classes of issue 51 items 3 and 4, generated from the schemas and the CLI:

- `physical_cases`: every physical field of a hardware profile, engine preset, model spec, HF
  config.json and day spec (a field typed `Plausible(...)`, found by walking the pydantic models over
  a bundled file) with its value off by a unit prefix (x 10^3, x 10^9) and at 1e300: one line naming
  the field, "is not plausible", exit 2. A field added to a schema with `Plausible` is tried
  without a line here. Where x 10^3 is still plausible (a day's chunk of 10 s -> 10,000 s) the case
  is a correct run, said in `PLAUSIBLE_SCALED`.
- `search_space_cases`: every search space (sweep grid, plan knobs x layouts x hardware x tp, day
  plan probes) at about 10^4 and 10^6 points: refused before any work, naming the count and the
  flag that raises the limit.
"""

# ruff: noqa: E501 (one case per line, however long)
from __future__ import annotations

import copy
import json
import typing

import yaml
from pydantic import BaseModel

from tests.malformed_corpus import DAY, HF, MODEL, OK, PRESET, PROFILE, TRACE, Case

SCALES = (("x1e3", 1e3), ("x1e9", 1e9), ("1e300", None))
# (kind, dotted field, scale label) still plausible after scaling, and why the run is correct
PLAUSIBLE_SCALED = {
    ("day", "workload.chunk_s", "x1e3"): "a 10,000 s chunk is a plausible chunk (the day is cut at its end)",
    ("day", "fleet.autoscaler.cooldown_up_s", "x1e3"): "a 60,000 s cooldown: the fleet never scales up twice in the day",
    ("day", "fleet.failures.repair_s", "x1e3"): "a 600,000 s repair: a failed replica's GPUs stay out all day",
    ("preset", "scheduling.max_num_batched_tokens", "x1e3"): "2,048,000 tokens a step: chunked prefill off on a 2M context (and H100 takes large_gpu_scheduling's)",
    ("model", "max_position_embeddings", "x1e3"): "an 8,192,000-token context (Llama 4 Scout's is 10M)",
}
# (kind, dotted field, scale label) refused by another check than the range, with that check's words
REFUSED_OTHERWISE = {("preset", "large_gpu_scheduling.max_num_batched_tokens", "x1e3"): "does not fit"}


def _nested_models(annotation) -> list[type[BaseModel]]:
    """The pydantic models a field holds directly (itself or as a member of a union)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _nested_models(arg)]


def _models_by_key(annotation) -> list[type[BaseModel]]:
    """The models a `dict[str, Model]` field holds per key (fleet facts per profile)."""
    if typing.get_origin(annotation) is dict:
        return _nested_models(typing.get_args(annotation)[1])
    return [m for arg in typing.get_args(annotation) for m in _models_by_key(arg)]


def physical_fields(model: type[BaseModel], doc: dict, prefix: str = "") -> list[tuple[str, str, float]]:
    """(dotted path, quantity, value) of every `Plausible` field `doc` gives a non-zero number."""
    from sim.schema import quantity_of

    found = []
    for name, field in model.model_fields.items():
        value = doc.get(name)
        quantity = quantity_of(field)
        if quantity is not None and isinstance(value, (int, float)) and not isinstance(value, bool) and value:
            found.append((f"{prefix}{name}", quantity, value))
        elif isinstance(value, dict):
            for nested in _nested_models(field.annotation):
                found += physical_fields(nested, value, f"{prefix}{name}.")
            for nested in _models_by_key(field.annotation):
                for key, item in value.items():
                    if isinstance(item, dict):
                        found += physical_fields(nested, item, f"{prefix}{name}.{key}.")
    return found


def _set(doc: dict, dotted: str, value) -> dict:
    out = copy.deepcopy(doc)
    *parents, key = dotted.split(".")
    node = out
    for parent in parents:
        node = node[parent]
    node[key] = value
    return out


def _scaled(value, factor):
    if factor is None:
        return 1e300
    return int(value * factor) if isinstance(value, int) else value * factor


DAY_DOC = yaml.safe_load(DAY)  # the hostile corpus's day, with the cooldown and repair fields its cases scale
DAY_DOC["fleet"]["autoscaler"]["cooldown_up_s"] = 60
DAY_DOC["fleet"]["failures"] = {"repair_s": 600}

FACTS_DOC = {"hardware": {"h100-sxm": {"storage_read_gb_s": 0.43, "gpu_mtbf_h": 50676, "repair_s": 3600,
                                       "price_per_gpu_h": {"on_demand": 12.29, "reserved": 6.5, "spot": 4.92},
                                       "spot_interruptions_per_h": 0.33}},
             "engines": {"vllm": {"startup_s": 35.0, "cuda_graph_capture_s": 17.0}}}  # sim/fleet/facts.yaml's


def _kinds():
    """kind -> (schema, bundled document, file name, argv reading the file, how the file is written)."""
    from sim.fleet.facts import FleetFacts
    from sim.fleet.spec import DaySpec
    from sim.inputs.engines.preset import EnginePreset
    from sim.inputs.hardware import HardwareProfile
    from sim.inputs.model.spec import ModelSpec

    return {
        "hardware": (HardwareProfile, PROFILE, "hw.yaml", "memory -H {d}/hw.yaml", yaml.safe_dump),
        "preset": (EnginePreset, PRESET, "e.yaml", "simulate -t {d}/t.csv --max-requests 3 --engine {d}/e.yaml", yaml.safe_dump),
        "model": (ModelSpec, MODEL, "m.yaml", "models {d}/m.yaml", yaml.safe_dump),
        "day": (DaySpec, DAY_DOC, "day.yaml", "day run {d}/day.yaml --out {d}/out --no-plot", yaml.safe_dump),
        # a day spec's `fleet.facts` override, validated where the replay reads it (sim/fleet/facts.py)
        "facts": (FleetFacts, FACTS_DOC, "day.yaml", "day run {d}/day.yaml --out {d}/out --no-plot",
                  lambda facts: yaml.safe_dump(_set(DAY_DOC, "fleet.facts", facts))),
    }


def physical_cases() -> list[Case]:
    """Every physical field of every user file kind x {x 10^3, x 10^9, 1e300}."""
    from sim.inputs.model.hf.common import PLAUSIBLE_KEYS

    cases = []
    for kind, (schema, doc, name, argv, dump) in _kinds().items():
        for dotted, _quantity, value in physical_fields(schema, doc):
            for label, factor in SCALES:
                files = {name: dump(_set(doc, dotted, _scaled(value, factor))), "t.csv": TRACE}
                key = (kind, dotted, label)
                expected = OK if key in PLAUSIBLE_SCALED else REFUSED_OTHERWISE.get(key, f"{dotted}: ")
                cases.append(Case(f"phys-{kind}-{dotted}-{label}", argv.split(), expected, files))
    for key in (k for k in HF if k in PLAUSIBLE_KEYS):  # a Hugging Face config.json: its own field names
        for label, factor in SCALES:
            text = json.dumps({**HF, key: _scaled(HF[key], factor)})
            cases.append(Case(f"phys-config.json-{key}-{label}", ["models", "{d}/config.json"], f"{key}: ", {"config.json": text}))
    return cases


DAY_TEXT = yaml.safe_dump(DAY_DOC)
DAY_RUN = "day run {d}/day.yaml --out {d}/out --no-plot"


def _day(**changes) -> str:
    doc = DAY_DOC
    for dotted, value in changes.items():
        doc = _set(doc, dotted.replace("__", "."), value)
    return yaml.safe_dump(doc)


def _profile(**changes) -> str:
    doc = PROFILE
    for dotted, value in changes.items():
        doc = _set(doc, dotted.replace("__", "."), value)
    return yaml.safe_dump(doc)


def physics_issue_cases() -> list[Case]:
    """Issue 51's own findings of this class, as filed."""
    from tests.malformed_corpus import case

    sim3 = "simulate -t {d}/t.csv --max-requests 3 -H {d}/hw.yaml"
    return [
        case("phys51-hbm-in-bytes", sim3, "memory.hbm_capacity_gib: 85899345920 is not plausible (allowed 1-2048 GiB); did you mean 80 GiB?", hw__yaml=_profile(memory__hbm_capacity_gib=85899345920), t__csv=TRACE),
        case("phys51-tflops-as-flops", sim3, "did you mean 989.4 TFLOP/s?", hw__yaml=_profile(compute__dense_bf16_tflops=989.4e12), t__csv=TRACE),
        case("phys51-link-latency-1e300", sim3, "interconnect.gpu_link_latency_us: 1e+300 is not plausible", hw__yaml=_profile(interconnect__gpu_link_latency_us=1e300), t__csv=TRACE),
        case("phys51-hbm-1e300", sim3, "memory.hbm_capacity_gib: 1e+300 is not plausible", hw__yaml=_profile(memory__hbm_capacity_gib=1e300), t__csv=TRACE),
        case("phys51-initial-above-max", DAY_RUN, "fleet: initial_replicas: 5 is above autoscaler.max_replicas (2)", day__yaml=_day(fleet__initial_replicas=5)),
        case("phys51-reserved-above-max", DAY_RUN, "pricing.reserved_replicas: 3 is above autoscaler.max_replicas (2)", day__yaml=_day(fleet__pricing={"reserved_replicas": 3})),
        case("phys51-static-above-max", DAY_RUN, "fleet.autoscaler: policy.replicas: 5 is above max_replicas (2)", day__yaml=_day(fleet__autoscaler__policy={"kind": "static", "replicas": 5})),
        case("phys51-day-zero-traffic", DAY_RUN, "the day carries no traffic", day__yaml=_day(**{"workload__tenants": [{**DAY_DOC["workload"]["tenants"][0], "rate": {"base": {"kind": "constant", "rate_rps": 2}, "steps": [{"at_s": 0, "rate_rps": 0}]}}]})),
        case("phys51-day-plan-zero-traffic", "day plan {d}/day.yaml", "the day carries no traffic", day__yaml=_day(**{"workload__tenants": [{**DAY_DOC["workload"]["tenants"][0], "rate": {"base": {"kind": "constant", "rate_rps": 2}, "steps": [{"at_s": 0, "rate_rps": 0}]}}]})),
        case("phys51-day-almost-no-traffic", DAY_RUN, OK, day__yaml=_day(**{"workload__tenants": [{**DAY_DOC["workload"]["tenants"][0], "rate": {"base": {"kind": "constant", "rate_rps": 1e-6}}}]})),
        case("phys51-day-chunk-tiny", "day plan {d}/day.yaml", "workload.chunk_s: 1e-300 is not plausible (allowed 1-2419200 s)", day__yaml=_day(workload__chunk_s=1e-300)),
        case("phys51-preset-overlap-text", "simulate -t {d}/t.csv --max-requests 3 --engine {d}/e.yaml", "overhead: overlap: must be true or false (got 'no')", e__yaml=yaml.safe_dump(_set(PRESET, "overhead.overlap", "no")), t__csv=TRACE),
        case("phys51-config-1e9-layers", "models {d}/config.json", "num_hidden_layers: 1000000000 is not plausible (allowed 1-1000 layers)", config__json=json.dumps({**HF, "num_hidden_layers": 10**9})),
    ]


def _values(n: int, start: int = 1) -> str:
    return ",".join(str(v) for v in range(start, start + n))


TRACE_30 = "arrival_s,prompt_tokens,output_tokens\n" + "".join(f"{i * 0.5},100,10\n" for i in range(30))
PLAN = "plan -w {d}/t.csv --target-qps 1 --slo ttft_p99=1s -H h100-sxm -p chunked"


def search_space_cases() -> list[Case]:
    """Every search space at ~10^4 and 10^6 points: refused before any work with the count and the
    flag that raises the limit (the case folder is left as it was: no sweep folder, no lock)."""
    sweep = "sweep -t {d}/t.csv -o {d}/out --no-plots"
    plan_tp = PLAN + " --tp 1"
    grids = {  # label -> (grid flags, count)
        "1e4": (f"-g max_num_seqs={_values(100)} -g max_num_batched_tokens={_values(100, 1000)}", 10**4),
        "1e6": (f"-g max_num_seqs={_values(100)} -g max_num_batched_tokens={_values(100, 1000)} -g seed={_values(100)}", 10**6),
    }
    cases = [Case(f"space-sweep-grid-{label}", f"{sweep} {flags}".split(), f"make {count:,} points, above --max-points 1,000; ask for fewer or raise --max-points", {"t.csv": TRACE})
             for label, (flags, count) in grids.items()]
    knobs = {
        "1e4": (f"--search max_num_seqs={_values(100)} --search max_num_batched_tokens={_values(100, 1000)}", 10**4),
        "1e6": (f"--search max_num_seqs={_values(100)} --search max_num_batched_tokens={_values(100, 1000)} --search block_size={_values(100)}", 10**6),
    }
    cases += [Case(f"space-plan-knobs-{label}", f"{plan_tp} {flags}".split(), f"make {count:,} candidates, above --max-candidates 1,000", {"t.csv": TRACE_30})
              for label, (flags, count) in knobs.items()]
    # hardware x TP x policies x knobs: 2 hardware x 2 tp x 3 policies x 1,000 knob values = 12,000
    wide = f"plan -w {{d}}/t.csv --target-qps 1 --slo ttft_p99=1s -H h100-sxm,h200 --tp 1,2 -p static,continuous,chunked --search max_num_seqs={_values(1000)}"
    cases.append(Case("space-plan-hardware-tp-policies-1e4", wide.split(), "make 12,000 candidates", {"t.csv": TRACE_30}))
    # a layout search (pp x ep x dp) on a MoE model
    layouts = f"plan -w {{d}}/t.csv --target-qps 1 --slo ttft_p99=1s -m qwen3-30b-a3b -H h100-sxm --tp 1,2,4 --pp 1,2 -p chunked --search max_num_seqs={_values(1000)}"
    cases.append(Case("space-plan-layouts-1e4", layouts.split(), "candidates, above --max-candidates 1,000", {"t.csv": TRACE_30}))
    # day plan: its candidate fleets span every reserved base up to the peak's count (one replica of
    # 8,000 / 1,000 tokens serves ~7 req/s): 10^5 req/s is ~2 x 10^4 replicas, 4 x 10^6 ~ 8 x 10^5
    tenant = {**DAY_DOC["workload"]["tenants"][0], "lengths": {"prompt": {"kind": "fixed", "value": 8000},
                                                                "output": {"kind": "fixed", "value": 1000}}}
    for label, rate_rps, n_tenants in (("1e4", 1e5, 1), ("1e6", 1e6, 4)):
        tenants = [{**copy.deepcopy(tenant), "name": f"t{i}", "rate": {"base": {"kind": "constant", "rate_rps": rate_rps}}} for i in range(n_tenants)]
        cases.append(Case(f"space-day-plan-fleets-{label}", ["day", "plan", "{d}/day.yaml", "--probe-s", "5"],
                          "req/s each, above the fleet limit of 10,000", {"day.yaml": _day(workload__tenants=tenants)}))
    return cases
