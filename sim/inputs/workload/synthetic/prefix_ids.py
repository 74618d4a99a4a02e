"""Prefix hash ids for synthetic requests, so a prefix cache sees exactly the sharing the
generator built.

A request's prompt is a token stream: a shared prefix (system prompt k, then the few-shot
instruction, then few-shot template f's examples), then its session's own tokens (for a
conversation: every earlier message and reply, then the new message). Block j of a
prompt (tokens [jB, (j+1)B)) gets an id that stands for all tokens up to its end:
- a whole block inside the system prompt + instruction: id of (k, j), shared by every
  request with system prompt k;
- a whole block inside the full shared prefix: id of (k, f, j);
- a whole block past the prefix: the session's own id for block j, shared by later turns
  of that conversation (their prompts start with this one's tokens);
- a last, partly filled block: an id no other request has. The next turn extends that
  block with more tokens, so its content (and its hash) differs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.inputs.workload.columns import ragged_offsets


@dataclass
class SharedPrefixes:
    """The distinct shared prefixes in use: their lengths and whole-block ids."""

    tokens: np.ndarray  # int64 per prefix
    block_ids: np.ndarray  # int64 [n_prefixes, max whole blocks], padded past each prefix's end
    n_ids: int  # ids 0..n_ids-1 are taken by shared prefix blocks


def build_shared_prefixes(
    system_tokens: np.ndarray,
    instruction_tokens: int,
    example_tokens: np.ndarray,
    pairs: np.ndarray,
    block_tokens: int,
) -> SharedPrefixes:
    """Ids for each (system template k, few-shot template f) row of `pairs`.
    `system_tokens[k]` and `example_tokens[f]` are the template lengths."""
    ids: dict[tuple, int] = {}
    tokens = np.zeros(len(pairs), dtype=np.int64)
    rows = []
    for row, (k, f) in enumerate(pairs.tolist()):
        common_end = int(system_tokens[k]) + instruction_tokens  # shared by every f under k
        tokens[row] = common_end + int(example_tokens[f])
        n_blocks = int(tokens[row]) // block_tokens
        keys = [
            (k, j) if (j + 1) * block_tokens <= common_end else (k, f, j) for j in range(n_blocks)
        ]
        rows.append([ids.setdefault(key, len(ids)) for key in keys])
    width = max((len(r) for r in rows), default=0)
    block_ids = np.zeros((len(pairs), width), dtype=np.int64)
    for row, row_ids in enumerate(rows):
        block_ids[row, : len(row_ids)] = row_ids
    return SharedPrefixes(tokens, block_ids, len(ids))


def request_hash_ids(
    prefixes: SharedPrefixes,
    prefix_of: np.ndarray,
    session_of: np.ndarray,
    prompt_tokens: np.ndarray,
    block_tokens: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Ragged (flat ids, offsets) for requests in session order (each session's turns
    in order). `prefix_of[r]` indexes `prefixes`; `session_of[r]` names the session."""
    n_requests = len(prompt_tokens)
    n_prefix_blocks = prefixes.tokens[prefix_of] // block_tokens
    n_session_blocks = prompt_tokens // block_tokens - n_prefix_blocks
    has_partial = (prompt_tokens % block_tokens != 0).astype(np.int64)
    n_sessions = int(session_of.max()) + 1 if n_requests else 0
    session_width = np.zeros(n_sessions, dtype=np.int64)
    np.maximum.at(session_width, session_of, n_session_blocks)
    session_base = prefixes.n_ids + ragged_offsets(session_width)
    partial_base = int(session_base[-1])

    lengths = n_prefix_blocks + n_session_blocks + has_partial
    offsets = ragged_offsets(lengths)
    n_ids = partial_base + n_requests
    flat = np.empty(offsets[-1], dtype=np.int32 if n_ids <= np.iinfo(np.int32).max else np.int64)
    start = 0
    while start < n_requests:  # rows a chunk at a time: temporaries stay ~IDS_PER_CHUNK long
        stop = int(np.searchsorted(offsets, offsets[start] + IDS_PER_CHUNK, side="right"))
        stop = min(max(stop - 1, start + 1), n_requests)
        rows = slice(start, stop)
        flat[offsets[start] : offsets[stop]] = _row_ids(
            prefixes, prefix_of[rows], session_base[session_of[rows]] - n_prefix_blocks[rows],
            n_prefix_blocks[rows], n_session_blocks[rows], lengths[rows], partial_base + start)
        start = stop
    return flat, offsets


IDS_PER_CHUNK = 1 << 20  # hash ids built per chunk of rows (~50 MB of temporaries)


def _row_ids(prefixes: SharedPrefixes, prefix_of: np.ndarray, session_start: np.ndarray,
             n_prefix_blocks: np.ndarray, n_session_blocks: np.ndarray, lengths: np.ndarray,
             first_partial_id: int) -> np.ndarray:
    """Flat ids of consecutive rows: shared-prefix block ids, then session block ids (block j of
    the row's session is `session_start + j`, counting j from the prompt's start), then the
    row's own id for a partly filled last block (`first_partial_id` + row)."""
    offsets = ragged_offsets(lengths)
    row = np.repeat(np.arange(len(lengths)), lengths)
    position = np.arange(offsets[-1]) - offsets[row]
    flat = session_start[row] + position  # every id a session block's, then the others put right
    partial_rows = np.flatnonzero(lengths > n_prefix_blocks + n_session_blocks)
    flat[offsets[partial_rows + 1] - 1] = first_partial_id + partial_rows
    if n_prefix_blocks.any():
        in_prefix = np.flatnonzero(position < n_prefix_blocks[row])
        flat[in_prefix] = prefixes.block_ids[prefix_of[row[in_prefix]], position[in_prefix]]
    return flat
