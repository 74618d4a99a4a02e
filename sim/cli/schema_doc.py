"""The workload spec schema as a page people read, generated from the pydantic models
(`sim.inputs.workload.spec_models`), so it cannot drift from what the loader accepts.

`infersim workload schema` prints it (`--json`: the JSON Schema itself); `workloads/SCHEMA.md` is
this page, checked equal by a test."""

from __future__ import annotations

import json

from sim.inputs.workload.spec_models import WorkloadSpec

CONSTRAINTS = (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<"),
               ("minItems", "items >="), ("maxItems", "items <="))


def json_schema() -> dict:
    return WorkloadSpec.model_json_schema()


def _type(prop: dict) -> str:
    if "$ref" in prop:
        return f"[{prop['$ref'].rsplit('/', 1)[-1]}](#{prop['$ref'].rsplit('/', 1)[-1].lower()})"
    if "const" in prop:
        return f"`{prop['const']}`"
    if "enum" in prop:
        return " \\| ".join(f"`{v}`" for v in prop["enum"])
    for key in ("anyOf", "oneOf"):
        if key in prop:
            return " or ".join(_type(p) for p in prop[key] if p.get("type") != "null") + (
                " or null" if any(p.get("type") == "null" for p in prop[key]) else "")
    kind = prop.get("type", "any")
    if kind == "array":
        inner = prop.get("prefixItems") or [prop.get("items", {})]
        return "list of " + ", ".join(_type(p) for p in inner)
    if kind == "object" and isinstance(prop.get("additionalProperties"), dict):
        return "mapping to " + _type(prop["additionalProperties"])
    if kind == "object":
        return "mapping"
    return kind


def _default(value) -> str:
    if isinstance(value, dict):
        return "all unset" if all(v is None for v in value.values()) else "see below"
    return f"`{json.dumps(value)}`"


def _limits(prop: dict) -> str:
    parts = [f"{sign} {prop[key]:,}" if isinstance(prop.get(key), (int, float)) else ""
             for key, sign in CONSTRAINTS if key in prop]
    for branch in prop.get("anyOf", []):
        parts.append(_limits(branch))
    return ", ".join(p for p in parts if p)


def _table(name: str, model: dict, required: set[str]) -> list[str]:
    lines = [f"### {name}", ""]
    if model.get("description"):
        lines += [" ".join(model["description"].split()), ""]
    lines += ["| key | type | default | allowed |", "|---|---|---|---|"]
    for key, prop in model.get("properties", {}).items():
        default = "required" if key in required else _default(prop["default"]) if "default" in prop else ""
        lines.append(f"| `{key}` | {_type(prop)} | {default} | {_limits(prop)} |")
    return lines + [""]


def markdown() -> str:
    """The whole reference page (Markdown)."""
    schema = json_schema()
    lines = ["# Workload spec schema", "",
             "Generated from `sim/inputs/workload/spec_models.py` by `infersim workload schema` (do not edit by hand).",
             "A spec is a YAML mapping; unknown keys are errors naming the file and the key. Examples:",
             "`workloads/poisson_sharegpt.yaml`, `workloads/multiturn_chat.yaml`, `workloads/closed_loop.yaml`.", ""]
    lines += _table("WorkloadSpec", schema, set(schema.get("required", [])))
    for name, model in sorted(schema.get("$defs", {}).items()):
        lines += _table(name, model, set(model.get("required", [])))
    return "\n".join(lines + _day_section()).rstrip() + "\n"


def _day_section() -> list[str]:
    """The day spec (`infersim day run`, sim/fleet/spec.py): its own models, after the workload's."""
    from sim.fleet.spec import DaySpec

    schema = DaySpec.model_json_schema()
    lines = ["## Day spec", "",
             "Generated from `sim/fleet/spec.py`, `sim/fleet/daygen.py` and `sim/fleet/profile.py`: the YAML that",
             "`infersim day run` and `infersim day plan` read (docs/day.md). Example:",
             "`workloads/days/diurnal_llama8b_h100.yaml`. Models the workload spec also uses are listed above.", ""]
    lines += _table("DaySpec", schema, set(schema.get("required", [])))
    workload_models = set(json_schema().get("$defs", {}))
    for name, model in sorted(schema.get("$defs", {}).items()):
        if name not in workload_models:
            lines += _table(name, model, set(model.get("required", [])))
    return lines
