"""Column checks shared by every loader, and the step that turns columns into a `Trace`.

Loaders read in chunks; each chunk's numbers pass through `checked_lengths` /
`checked_times` (vectorised, so a 1M-row trace costs a few numpy passes), land in a
`ChunkedColumn`, and `build_trace` joins them, re-bases time to the earliest request
and sorts (with a warning, or an `InputError` under strict).
"""

from __future__ import annotations

import warnings

import numpy as np

from sim.errors import InputError
from sim.inputs.budget import MAX_TIME_S
from sim.inputs.workload.trace import Trace
from sim.schema import MAX_TOKENS


class ChunkedColumn:
    """A growing column: a list of numpy chunks joined once at the end (no per-row objects)."""

    def __init__(self, dtype: type) -> None:
        self.dtype = dtype
        self.chunks: list[np.ndarray] = []

    def append(self, chunk: np.ndarray) -> None:
        self.chunks.append(np.asarray(chunk, dtype=self.dtype))

    def join(self) -> np.ndarray:
        """One array of every chunk. Each chunk is freed as soon as it is copied, and the
        target's pages are only touched while being filled, so the peak stays near the
        final size plus one chunk (not twice the final size)."""
        if len(self.chunks) == 1:
            return self.chunks[0]
        joined = np.empty(sum(len(chunk) for chunk in self.chunks), dtype=self.dtype)
        start = 0
        self.chunks.reverse()
        while self.chunks:
            chunk = self.chunks.pop()
            joined[start : start + len(chunk)] = chunk
            start += len(chunk)
        self.chunks = [joined]
        return joined


def numeric_array(
    values: list, where: str, field: str, row_labels: list[int], unit: str
) -> np.ndarray:
    """Python values -> float64 array; a missing, textual or boolean value is an InputError
    naming its row (`unit` is "row" or "line")."""
    arr = np.array(values) if values else np.empty(0, dtype=np.float64)
    if arr.ndim == 1 and arr.dtype.kind in "iuf" and not any(type(v) is bool for v in values):
        return arr.astype(np.float64)  # (numpy reads [10, true] as [10, 1]: booleans are checked above)
    for value, label in zip(values, row_labels):
        if value is None:
            raise InputError(where, field, f"missing at {unit} {label}")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError(where, field, f"must be a number; {unit} {label} has {value!r}")
    raise InputError(where, field, "must be a number in every row")


def checked_lengths(
    values: np.ndarray, where: str, field: str, first_row: int, minimum: int = 1
) -> np.ndarray:
    """Token counts as int64, each a whole number in [`minimum`, MAX_TOKENS] (so nothing can
    wrap around in int64); rows count from `first_row`."""
    values = np.asarray(values, dtype=np.float64)
    bad = np.isnan(values)
    if bad.any():
        raise InputError(where, field, f"missing value at row {first_row + int(np.argmax(bad))}")
    bad = (values < minimum) | (values > MAX_TOKENS) | (values != np.floor(values))
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(
            where,
            field,
            f"must be a whole number in [{minimum}, {MAX_TOKENS:,}]; row {first_row + i} has {values[i]:g}",
        )
    return values.astype(np.int64)


def checked_times(values: np.ndarray, where: str, field: str, first_row: int) -> np.ndarray:
    """Arrival times as float64; every one must be a finite number."""
    values = np.asarray(values, dtype=np.float64)
    bad = ~np.isfinite(values)
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(
            where, field, f"must be a finite time; row {first_row + i} has {values[i]}"
        )
    return values


def ragged_offsets(lengths: np.ndarray) -> np.ndarray:
    """Per-row list lengths -> offsets array of len(rows) + 1."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


def build_trace(
    *,
    where: str,
    time_field: str,
    arrival_s: np.ndarray,
    prompt_tokens: np.ndarray,
    output_tokens: np.ndarray,
    strict: bool,
    n_samples: np.ndarray | None = None,
    hash_ids_flat: np.ndarray | None = None,
    hash_offsets: np.ndarray | None = None,
    hash_block_tokens: int | None = None,
    extra: dict | None = None,
    rebase_time: bool = True,
) -> Trace:
    """Assemble a Trace: empty -> InputError; negative times -> InputError; time re-based so the
    earliest request arrives at 0 s (unless `rebase_time` is False: our canonical files are
    already relative); at most sim.inputs.budget.MAX_TIME_S from first to last; unsorted arrivals
    sorted stably with a warning (InputError
    when `strict`)."""
    if len(arrival_s) == 0:
        raise InputError(where, None, "no requests; expected at least one data row")
    if arrival_s.min() < 0:  # refused, not shifted: shifting would move every request
        row = int(np.argmin(arrival_s)) + 1
        raise InputError(where, time_field, f"must be >= 0 s; row {row} has {arrival_s.min()}")
    if rebase_time:
        arrival_s = arrival_s - arrival_s.min()
    if arrival_s.max() > MAX_TIME_S:
        row = int(np.argmax(arrival_s)) + 1
        raise InputError(where, time_field, f"spans at most {MAX_TIME_S:g} s; row {row} arrives {arrival_s.max():g} s "
                                            "after the first")
    trace = Trace(
        arrival_s=arrival_s,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        n_samples=n_samples,
        hash_ids_flat=hash_ids_flat,
        hash_offsets=hash_offsets,
        hash_block_tokens=hash_block_tokens,
        source=where,
        extra=extra or {},
    )
    backwards = np.diff(arrival_s) < 0
    if not backwards.any():
        return trace
    row = int(np.argmax(backwards)) + 2
    if strict:
        raise InputError(where, time_field, f"must be non-decreasing (row {row} goes back in time)")
    warnings.warn(
        f"{where}: {time_field} not sorted (row {row} goes back in time); sorted by arrival",
        stacklevel=3,
    )
    return trace.take(np.argsort(arrival_s, kind="stable"))


def generic_column_names(columns: dict[str, str] | None) -> dict[str, str]:
    """Our field names mapped to a generic file's column names; unmapped fields keep our names."""
    names = {"arrival_s": "arrival_s", "prompt_tokens": "prompt_tokens", "output_tokens": "output_tokens"}
    names.update(columns or {})
    return names
