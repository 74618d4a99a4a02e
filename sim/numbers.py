"""Strict reading of one number from a user's text or JSON value, for the readers that do not go
through a pydantic schema (`--bench` key=values, validate CSV cells, `vllm bench serve` JSON).

The same rules as `sim.schema.StrictModel`: no booleans, no null, finite only (no NaN, inf,
1e400), whole where a count goes (`1e19` is not an int64), within the stated range. Every
refusal is one `InputError` naming where (a file and row, or a flag), the field and the range.
"""

from __future__ import annotations

import math
import re

from sim.errors import InputError

_INTEGER_TEXT = re.compile(r"[+-]?\d+")


def strict_number(value, where: str, field: str | None, *, whole: bool = False, low: float | None = None,
                  high: float | None = None, low_open: bool = False) -> int | float:
    """`value` (text or a JSON number) as an int (`whole`) or a finite float in [low, high]
    (`low_open`: (low, high]); InputError otherwise."""
    allowed = _allowed(whole, low, high, low_open)
    if value is None or isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise InputError(where, field, f"must be {allowed} (got {_shown(value)})")
    number = _parse(value, where, field, allowed) if isinstance(value, str) else value
    if isinstance(number, float) and not math.isfinite(number):
        raise InputError(where, field, f"must be {allowed} (got {_shown(value)})")
    if whole and isinstance(number, float):
        if not number.is_integer():
            raise InputError(where, field, f"must be {allowed} (got {_shown(value)})")
        number = int(number)
    too_low = low is not None and (number <= low if low_open else number < low)
    if too_low or (high is not None and number > high):
        raise InputError(where, field, f"must be {allowed} (got {_shown(value)})")
    return number


def _parse(text: str, where: str, field: str | None, allowed: str) -> int | float:
    stripped = text.strip()
    try:
        return int(stripped) if _INTEGER_TEXT.fullmatch(stripped) else float(stripped)
    except (ValueError, OverflowError):
        raise InputError(where, field, f"must be {allowed} (got {_shown(text)})") from None


def _allowed(whole: bool, low: float | None, high: float | None, low_open: bool) -> str:
    kind = "a whole number" if whole else "a finite number"
    if low is not None and high is not None:
        return f"{kind} in {'(' if low_open else '['}{_num(low)}, {_num(high)}]"
    if low is not None:
        return f"{kind} {'>' if low_open else '>='} {_num(low)}"
    if high is not None:
        return f"{kind} <= {_num(high)}"
    return kind


def _num(bound: float) -> str:
    return f"{bound:,}" if isinstance(bound, int) else f"{bound:g}"


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
