"""Our canonical JSONL: one request per line, written atomically.

Keys: `arrival_s`, `prompt_tokens`, `output_tokens`; when present in the trace also `n`
(parallel samples), `hash_ids` with `hash_block_tokens` (repeated on every line, so any
slice of the file stays self-describing), `session_id` and `turn`. Read it back with
`load_workload(path, "canonical")` (or let the format be sniffed).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from sim.trace import ClosedLoop, Trace

CANONICAL_EXTRAS = ("session_id", "turn")


def _line_parts(trace: Trace) -> list[tuple[str, list]]:
    """(key, per-row Python values) for every column the file will hold."""
    parts = [
        ("arrival_s", trace.arrival_s.tolist()),
        ("prompt_tokens", trace.prompt_tokens.tolist()),
        ("output_tokens", trace.output_tokens.tolist()),
    ]
    if trace.n_samples is not None:
        parts.append(("n", trace.n_samples.tolist()))
    for key in CANONICAL_EXTRAS:
        if key in trace.extra:
            parts.append((key, trace.extra[key].astype(int).tolist()))
    return parts


def write_canonical_jsonl(workload: Trace | ClosedLoop, path: str | Path) -> int:
    """Write `workload` (a ClosedLoop writes its request pool) to `path` via a temporary
    file renamed into place, so a failure never leaves a half-written file. Returns rows."""
    trace = workload.pool if isinstance(workload, ClosedLoop) else workload
    path = Path(path)
    parts = _line_parts(trace)
    ids = trace.hash_ids_flat.tolist() if trace.has_hash_ids else None
    offsets = trace.hash_offsets.tolist() if trace.has_hash_ids else None
    descriptor, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            for row in range(len(trace)):
                # repr of a Python int/float is its JSON text (floats round-trip exactly)
                fields = [f'"{key}": {values[row]!r}' for key, values in parts]
                if ids is not None:
                    row_ids = ", ".join(map(str, ids[offsets[row] : offsets[row + 1]]))
                    fields.append(f'"hash_ids": [{row_ids}]')
                    fields.append(f'"hash_block_tokens": {trace.hash_block_tokens}')
                handle.write("{" + ", ".join(fields) + "}\n")
        os.replace(temp_name, path)
    except BaseException:
        os.unlink(temp_name)
        raise
    return len(trace)
