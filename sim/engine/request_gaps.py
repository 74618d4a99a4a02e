"""Each request's own inter-token gaps, kept only when a run is asked for them (`simulate
--save-detailed`: bench_serve.json's per-request `itls`, as vLLM's --save-detailed writes them).

The recorder's run-wide gaps (sim/engine/metrics.py) are weighted samples without owners, enough for
percentiles but not for one request's list. Here every gap is stored with its request row, from the
same numbers the recorder gets at the same moments, so the pooled `itls` hold exactly the gaps behind
`p99_itl_ms` (tests/test_bench_itls.py). Memory is bounded: past `COMPACT_AT` stored gaps, a request's
gaps that lie within `BIN_RELATIVE_WIDTH` of each other (one geometric bin) are merged into their mean
with a count, so memory follows (request, bin) pairs, not tokens; a request's list then keeps its sum
and its gaps to within 0.2 %, grouped by size instead of in token order.
"""

from __future__ import annotations

import numpy as np

from sim.engine.growable import Growable

COMPACT_AT = 4_000_000  # stored gaps (row, value, count: 24 bytes each) before equal-bin gaps are merged
BIN_RELATIVE_WIDTH = 0.002  # gaps merged on compaction differ by at most this share
_LOG_BIN = np.log1p(BIN_RELATIVE_WIDTH)


class RequestGaps:
    """Gaps with the table row of the request they belong to (append during the run, lists after)."""

    def __init__(self, compact_at: int = COMPACT_AT):
        self.rows = Growable(np.int64)
        self.values = Growable()
        self.counts = Growable(np.int64)
        self._compact_at_base = compact_at
        self._compact_at = compact_at
        self.compacted = False

    def add(self, rows, values) -> None:
        """One gap per row (a single step's)."""
        n = len(values)
        self.rows.claim(n)[:] = rows
        self.values.claim(n)[:] = values
        self.counts.claim(n)[:] = 1
        self._maybe_compact()

    def add_run(self, rows: np.ndarray, first_gaps: np.ndarray, later_steps_s: np.ndarray,
                seq_steps: np.ndarray | None = None) -> None:
        """A decode run's gaps: row j's first gap, then each later step it computed (all of them, or
        its first `seq_steps[j]` steps in a run past finishes)."""
        self.add(rows, first_gaps)
        n_later = later_steps_s.shape[0]
        if n_later == 0:
            return
        if seq_steps is None:
            later_rows = np.repeat(rows, n_later)
            later_values = np.tile(later_steps_s, rows.shape[0])
        else:
            taken = np.arange(n_later)[None, :] < (np.asarray(seq_steps) - 1)[:, None]  # step s + 1 computed by j
            later_rows = np.broadcast_to(rows[:, None], taken.shape)[taken]
            later_values = np.broadcast_to(later_steps_s[None, :], taken.shape)[taken]
        self.add(later_rows, later_values)

    def _maybe_compact(self) -> None:
        if self.rows.size >= self._compact_at:
            self.compact()

    def compact(self) -> None:
        """Merge each request's gaps of one geometric bin into their mean with their count."""
        rows, values, counts = self.rows.array(), self.values.array(), self.counts.array()
        bins = np.floor(np.log(np.maximum(values, 1e-12)) / _LOG_BIN).astype(np.int64)
        keys, inverse = np.unique(np.stack([rows, bins]), axis=1, return_inverse=True)
        inverse = inverse.reshape(-1)
        merged_counts = np.bincount(inverse, weights=counts).astype(np.int64)
        merged_values = np.bincount(inverse, weights=values * counts) / merged_counts
        self.rows, self.values, self.counts = (Growable.holding(keys[0].copy()), Growable.holding(merged_values),
                                               Growable.holding(merged_counts))
        self._compact_at = max(self._compact_at_base, 2 * keys.shape[1])
        self.compacted = True

    def remapped(self, table_rows: np.ndarray) -> RequestGaps:
        """The same gaps with row r renamed table_rows[r] (a replica's share table -> the whole run's)."""
        self.rows = Growable.holding(np.asarray(table_rows)[self.rows.array()])
        return self

    @classmethod
    def merged(cls, parts: list[RequestGaps]) -> RequestGaps:
        """One store holding every part's gaps (replicas of one run: their rows never overlap)."""
        out = cls(parts[0]._compact_at_base)
        out.rows = Growable.holding(np.concatenate([p.rows.array() for p in parts]))
        out.values = Growable.holding(np.concatenate([p.values.array() for p in parts]))
        out.counts = Growable.holding(np.concatenate([p.counts.array() for p in parts]))
        out.compacted = any(p.compacted for p in parts)
        out._maybe_compact()
        return out

    def lists(self, owner_of_row: np.ndarray, n_requests: int) -> list[list[float]]:
        """Per request (0 .. n_requests-1) its gaps in seconds: in token order while never compacted
        (stored in time order), else grouped by size; a parallel sample's gaps go to its request."""
        owners = np.asarray(owner_of_row)[self.rows.array()]
        order = np.argsort(owners, kind="stable")
        owners, values, counts = owners[order], self.values.array()[order], self.counts.array()[order]
        expanded = np.repeat(values, counts)
        ends = np.cumsum(np.bincount(np.repeat(owners, counts), minlength=n_requests))
        starts = np.concatenate([[0], ends[:-1]])
        return [expanded[a:b].tolist() for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
