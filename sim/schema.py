"""The base of every user-facing pydantic schema, and the sane limits input must respect.

`StrictModel`: unknown keys are errors, instances are frozen, floats must be finite (no `.inf`,
`.nan`) and `true`/`false` are never read as numbers (pydantic's lax mode would read `true` as 1).
"""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

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
        return data


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
