"""The base of every user-facing pydantic schema, and the sane limits input must respect.

`StrictModel`: unknown keys are errors, instances are frozen, floats must be finite (no `.inf`,
`.nan`) and `true`/`false` are never read as numbers (pydantic's lax mode would read `true` as 1).
"""

from __future__ import annotations

import types
import typing
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

# Longest sequence (prompt or output) any input may ask for, in tokens. Above the longest
# context of any public model (Llama 4 Scout: 10M tokens), far below where int64 arithmetic on
# token counts (sums, products with bytes per token) could overflow.
MAX_TOKENS = 10_000_000
# Most requests one synthetic workload may generate (memory: a few int64 columns of this length).
MAX_REQUESTS = 10_000_000
# Highest arrival rate any input may ask for, in requests/s: one request a nanosecond. Faster is
# indistinguishable from all at once (`--qps inf`), and gaps of 1e-308 s underflow the arithmetic
# on arrival times (the queue-growth fit's SVD diverges on them).
MAX_RATE_QPS = 1e9
# Seeds go to numpy.random.default_rng (any int >= 0) and into parquet/JSON columns (int64).
MAX_SEED_EXCLUSIVE = 2**63


class StrictModel(BaseModel):
    """Forbid unknown keys, freeze, require finite floats, refuse booleans where numbers go."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _no_booleans_as_numbers(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name, value in data.items():
                field = cls.model_fields.get(name) if isinstance(name, str) else None
                if field is not None and _holds_bool(value) and not _admits_bool(field.annotation):
                    raise ValueError(f"{name}: must be a number or text, not true/false (got {value!r})")
                if field is not None and _is_flag(field.annotation) and not isinstance(value, (bool, type(None))):
                    raise ValueError(f"{name}: must be true or false (got {value!r})")
        return data


def _is_flag(annotation: Any) -> bool:
    """A field that holds only true/false (or null): pydantic's lax mode would read the text "no",
    "off" or "0" as false, so an engine preset's `overlap: "no"` is refused rather than guessed."""
    if annotation is bool:
        return True
    args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    return isinstance(annotation, types.UnionType) and args == [bool]


def _holds_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return True
    if isinstance(value, (list, tuple)):
        return any(_holds_bool(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_bool(k) or _holds_bool(v) for k, v in value.items())
    return False


def _admits_bool(annotation: Any) -> bool:
    """Whether a field of this type may legitimately hold a boolean somewhere inside it.
    Nested models and `Any` validate their own contents, so they count as admitting."""
    if annotation is bool or annotation is Any:
        return True
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return True
    if typing.get_origin(annotation) is typing.Literal:
        return any(isinstance(arg, bool) for arg in typing.get_args(annotation))
    if annotation is dict or annotation is list:
        return True
    args = typing.get_args(annotation)
    if isinstance(annotation, types.UnionType) or args:
        return any(_admits_bool(arg) for arg in args if not _is_metadata(arg))
    return False


def _is_metadata(arg: Any) -> bool:
    return not (isinstance(arg, type) or typing.get_origin(arg) is not None or arg is Any)


# ---- plausible physical quantities: sim/specs/plausible.yaml is the one table of ranges ----
PLAUSIBLE_TABLE = Path(__file__).resolve().parent / "specs" / "plausible.yaml"
# unit prefixes a value may be off by (decimal first: the datasheet's GB/s and TFLOP/s are decimal)
PREFIX_FACTORS = (1e3, 1e6, 1e9, 1e12, 1e15, 2.0**10, 2.0**20, 2.0**30, 2.0**40)


@lru_cache(maxsize=1)
def plausible_ranges() -> dict[str, dict]:
    """quantity -> {unit, min, max, why}, read once from the bundled table."""
    return yaml.safe_load(PLAUSIBLE_TABLE.read_text())


def shown(value: float) -> str:
    """A number as the user wrote it, not rounded (85899345920, 1e+300, 0.5)."""
    if isinstance(value, int):
        return str(value)
    if value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return repr(value)


def likely_meant(value: float, low: float, high: float) -> float | None:
    """The value a unit prefix away that lands in [low, high], or None. Of several, the roundest
    (fewest significant digits: 85899345920 / 2^30 = 80 beats / 10^9 = 85.899...)."""
    if value == 0 or not low <= high:
        return None
    candidates = [value / f for f in PREFIX_FACTORS] + [value * f for f in PREFIX_FACTORS]
    inside = [c for c in candidates if low <= c <= high and c != value]
    if not inside:
        return None
    return min(inside, key=lambda c: len(f"{c:.6g}".replace(".", "").strip("0")))


def plausible_check(quantity: str, value: float) -> str | None:
    """None when `value` is a plausible `quantity`; otherwise what is wrong, with the range, the
    unit, and the likely intended value when a unit prefix explains it."""
    entry = plausible_ranges()[quantity]
    low, high, unit = entry["min"], entry["max"], entry["unit"]
    if low <= value <= high:
        return None
    message = f"{shown(value)} is not plausible (allowed {shown(low)}-{shown(high)} {unit})"
    meant = likely_meant(value, low, high) if entry.get("suggest", True) else None
    return message if meant is None else f"{message}; did you mean {meant:.6g} {unit}?"


class PlausibleQuantity(str):
    """The table entry a field's type names (what `quantity_of` finds: tests generate cases from it)."""


def Plausible(quantity: str, kind: type = float):  # noqa: N802 (used as a type)
    """A field type: a number (`kind`) within the table's range for `quantity`."""
    if quantity not in plausible_ranges():
        raise KeyError(f"{quantity!r} is no entry of {PLAUSIBLE_TABLE.name}")

    def check(value):
        problem = plausible_check(quantity, value)
        if problem is not None:
            raise ValueError(problem)
        return value

    entry = plausible_ranges()[quantity]  # the JSON Schema (workloads/SCHEMA.md) states the range too
    bounds = Field(json_schema_extra={"minimum": entry["min"], "maximum": entry["max"]})
    return Annotated[kind, bounds, PlausibleQuantity(quantity), AfterValidator(check)]


def quantity_of(field: Any) -> str | None:
    """The plausible-range entry of a pydantic field (`Plausible(...)`, or it `| None`), else None."""
    for meta in [*getattr(field, "metadata", ()), *getattr(field, "__metadata__", ())]:
        if isinstance(meta, PlausibleQuantity):
            return str(meta)
    annotation = getattr(field, "annotation", None)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return next((q for q in map(quantity_of, typing.get_args(annotation)) if q is not None), None)
    return None
