"""Durations and byte counts as people read them (`21.1 s`, not `2.11e+04 ms`; `68.6 KiB`, not
`0.00 GiB`): the one formatter every printed line of the CLI uses for times and sizes. Files
(summary.json, plan.json) keep plain numbers in stated units; only what is printed goes through here."""

from __future__ import annotations

import math

_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def duration_text(seconds: float | None) -> str:
    """`850 us`, `35.5 ms`, `21.1 s`, `4.2 min`, `3.1 h`: three significant figures in the largest unit
    the value reaches ('-' for None or NaN)."""
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "-"
    size = abs(seconds)
    if size == 0:
        return "0 s"
    for scale, unit, below in ((1e-6, "us", 1e-3), (1e-3, "ms", 1.0), (1.0, "s", 120.0), (60.0, "min", 7200.0)):
        if size < below:
            return f"{_three(seconds / scale)} {unit}"
    return f"{_three(seconds / 3600.0)} h"


def ms_text(milliseconds: float | None) -> str:
    """`duration_text` of a value held in milliseconds (plan.json's `p99_ms`)."""
    return duration_text(None if milliseconds is None else milliseconds / 1e3)


def bytes_text(n_bytes: float | None) -> str:
    """`576 B`, `68.6 KiB`, `1.50 MiB`, `71.4 GiB` (binary units, three significant figures)."""
    if n_bytes is None:
        return "-"
    value, unit = float(n_bytes), 0
    while abs(value) >= 1024 and unit < len(_BYTE_UNITS) - 1:
        value /= 1024
        unit += 1
    return f"{value:.0f} B" if unit == 0 else f"{_three(value)} {_BYTE_UNITS[unit]}"


def _three(value: float) -> str:
    """Three significant figures without exponent notation (1000 and above: whole numbers)."""
    size = abs(value)
    if size >= 100:
        return f"{value:.0f}"
    if size >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"
