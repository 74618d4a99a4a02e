"""Our canonical JSONL: one request per line, written atomically.

Keys: `arrival_s`, `prompt_tokens`, `output_tokens`; when present in the trace also `n`
(parallel samples), `hash_ids` with `hash_block_tokens` (repeated on every line, so any
slice of the file stays self-describing), `session_id` and `turn`. Read it back with
`load_workload(path, "canonical")` (or let the format be sniffed).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from sim.inputs.workload.trace import ClosedLoop, Trace
from sim.output import staging_file, with_normal_mode

CANONICAL_EXTRAS = ("session_id", "turn", "adapter", "adapter_rank")


ROWS_PER_CHUNK = 65_536  # rows turned into Python values at a time (bounds the writer's memory)
IDS_PER_CHUNK = 1 << 20  # and at most this many hash ids (a Python int each while a chunk is written)


def _line_parts(trace: Trace, rows: slice) -> list[tuple[str, list]]:
    """(key, Python values of `rows`) for every column the file will hold."""
    parts = [
        ("arrival_s", trace.arrival_s[rows].tolist()),
        ("prompt_tokens", trace.prompt_tokens[rows].tolist()),
        ("output_tokens", trace.output_tokens[rows].tolist()),
    ]
    if trace.n_samples is not None:
        parts.append(("n", trace.n_samples[rows].tolist()))
    for key in CANONICAL_EXTRAS:
        if key in trace.extra:
            parts.append((key, trace.extra[key][rows].astype(int).tolist()))
    return parts


def _write_rows(handle, trace: Trace, start: int, stop: int) -> None:
    """Lines of rows start..stop-1: each line one %-format of the row's values (the repr of a Python
    int or float is its JSON text, floats round-trip exactly; a list of ints' repr is its JSON array)."""
    parts = _line_parts(trace, slice(start, stop))
    line_format = "{" + ", ".join(f'"{key}": %r' for key, _ in parts)
    rows = zip(*(values for _, values in parts))
    if not trace.has_hash_ids:
        line_format += "}\n"
        handle.write("".join([line_format % row for row in rows]))
        return
    line_format += f', "hash_ids": %r, "hash_block_tokens": {trace.hash_block_tokens}}}\n'
    offsets = (trace.hash_offsets[start : stop + 1] - trace.hash_offsets[start]).tolist()
    ids = trace.hash_ids_flat[trace.hash_offsets[start] : trace.hash_offsets[stop]].tolist()
    handle.write("".join([line_format % (*row, ids[begin:end])
                          for row, begin, end in zip(rows, offsets, offsets[1:])]))


def _chunk_end(trace: Trace, start: int) -> int:
    """End of the chunk of rows starting at `start`: ROWS_PER_CHUNK rows, fewer when their hash
    ids would exceed IDS_PER_CHUNK (at least one row)."""
    stop = min(start + ROWS_PER_CHUNK, len(trace))
    if trace.has_hash_ids:
        offsets = trace.hash_offsets
        within = int(np.searchsorted(offsets, offsets[start] + IDS_PER_CHUNK, side="right")) - 1
        stop = min(stop, max(within, start + 1))
    return stop


def write_canonical_jsonl(workload: Trace | ClosedLoop, path: str | Path) -> int:
    """Write `workload` (a ClosedLoop writes its request pool) to `path` via a temporary
    file renamed into place, so a failure never leaves a half-written file. Rows are
    converted and written a chunk at a time, so memory stays flat in the trace's length.
    Returns rows."""
    trace = workload.pool if isinstance(workload, ClosedLoop) else workload
    path = Path(path)
    temp_name = staging_file(path)  # `.NAME.partial-PID-*`: a killed run's is removed by the next
    try:
        with open(temp_name, "w", encoding="utf-8") as handle:
            start = 0
            while start < len(trace):
                stop = _chunk_end(trace, start)
                _write_rows(handle, trace, start, stop)
                start = stop
        with_normal_mode(temp_name)  # not mkstemp's 0600
        os.replace(temp_name, path)
    except BaseException:
        os.unlink(temp_name)
        raise
    return len(trace)
