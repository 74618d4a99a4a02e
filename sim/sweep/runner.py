"""A whole sweep: skip finished points, run the rest on a backend, store rows as they arrive, plot."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from sim.sweep.grid import SweepPoint
from sim.sweep.point import run_point
from sim.sweep.store import ResultStore


@dataclass
class SweepOutcome:
    out_dir: Path
    n_points: int  # in this grid
    n_skipped: int  # already finished by an earlier run
    n_ran: int
    frame: pd.DataFrame  # this grid's rows (results.parquet may hold more, from other grids)
    plots: list[Path] = field(default_factory=list)


def unique_points(points: list[SweepPoint]) -> list[SweepPoint]:
    """Drop points that normalize to the same id (e.g. `max_model_len=null` next to the default)."""
    seen: dict[str, SweepPoint] = {}
    for point in points:
        seen.setdefault(point.point_id, point)
    return list(seen.values())


def run_sweep(points: list[SweepPoint], grid_keys: list[str], out_dir: Path, backend,
              on_start: Callable[[int, int], None] | None = None,
              on_point: Callable[[dict], None] | None = None) -> SweepOutcome:
    """Run the points of `points` not yet in `out_dir`; each row goes to disk the moment it arrives.

    `on_start(n_to_run, n_skipped)` is called once, `on_point(row)` after each stored point.
    results.parquet is rebuilt after every point and once more at the end (also on errors once a
    point is stored; before that an error leaves nothing behind)."""
    points = unique_points(points)
    store = ResultStore(out_dir)
    try:
        finished = store.finished_ids()
        todo = [p for p in points if p.point_id not in finished]
        if on_start is not None:
            on_start(len(todo), len(points) - len(todo))
        try:
            for _, row in backend.run_tasks(run_point, [(point,) for point in todo]):
                store.add(row)
                store.consolidate(grid_keys)
                if on_point is not None:
                    on_point(row)
        except BaseException:
            if store.rows:
                store.consolidate(grid_keys)
            else:
                store.discard_if_unused()  # failed before its first point: leave nothing behind
            raise
        frame = store.consolidate(grid_keys)
    finally:
        store.close()
    wanted = [p.point_id for p in points]
    mine = frame.set_index("point_id").loc[wanted].reset_index()
    return SweepOutcome(store.out_dir, len(points), len(points) - len(todo), len(todo), mine)
