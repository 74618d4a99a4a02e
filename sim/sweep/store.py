"""Sweep results on disk, safe against `kill -9` at any moment.

Layout of the out folder:
- `parts/<point_id>.parquet`: one finished point (one row), written atomically (temp + rename) the
  moment the point finishes. A part either exists whole or not at all; the point id names it, so a
  point can never have two parts.
- `results.parquet`: every part's row, rebuilt from the parts (atomically) after each finished point.
  It is derived data: a kill between a part and the rebuild leaves it one row behind until the next
  run, never half-written and never with a duplicated row.

A sweep that fails before storing any point removes what it created (folder, lock, parts/).
A kill loses at most the points in flight. The temp files a kill may leave behind start with a dot
and are removed when the store is opened again. One sweep writes to a folder at a time (a lock).
"""

from __future__ import annotations

import contextlib
import fcntl
from pathlib import Path

import pandas as pd
import pyarrow as pa

from sim.errors import InputError
from sim.output import prepare_out_dir, write_parquet

RESULTS_NAME = "results.parquet"
PARTS_DIR_NAME = "parts"
LOCK_NAME = ".sweep.lock"
# every name a sweep writes in its folder (plots per grid key and metric; staging files of results.parquet)
SWEEP_NAMES = (RESULTS_NAME, PARTS_DIR_NAME, LOCK_NAME, "sweep_*.png", "heatmap_*.png", f".{RESULTS_NAME}.*")


class ResultStore:
    """The finished rows of one out folder, keyed by point id."""

    def __init__(self, out_dir: Path):
        out_dir = Path(out_dir)
        _check_layout(out_dir)
        self._new_paths = [p for p in (out_dir, out_dir / LOCK_NAME, out_dir / PARTS_DIR_NAME,
                                       out_dir / RESULTS_NAME) if not p.exists()]
        self.out_dir = prepare_out_dir(out_dir)
        self._lock_file = _lock_exclusively(self.out_dir / LOCK_NAME)
        self.parts_dir = self.out_dir / PARTS_DIR_NAME
        self.parts_dir.mkdir(exist_ok=True)
        _remove_stale_temps(self.out_dir, self.parts_dir)
        self.rows: dict[str, dict] = _read_parts(self.parts_dir)

    @property
    def results_path(self) -> Path:
        return self.out_dir / RESULTS_NAME

    def finished_ids(self) -> set[str]:
        return set(self.rows)

    def add(self, row: dict) -> None:
        """Record one finished point: its part file first (atomic), then the in-memory row."""
        point_id = row["point_id"]
        write_parquet(self.parts_dir / f"{point_id}.parquet", pd.DataFrame([row]))
        self.rows[point_id] = row

    def close(self) -> None:
        """Release the folder for the next sweep (a killed process releases it too)."""
        self._lock_file.close()

    def discard_if_unused(self) -> None:
        """After a sweep that stored nothing: close, and remove what opening this store created
        (lock, parts/, results.parquet, the folder itself), so a failed first run leaves no trace."""
        self.close()
        if self.rows:
            return
        for path in reversed(self._new_paths):
            with contextlib.suppress(OSError):
                path.rmdir() if path.is_dir() else path.unlink(missing_ok=True)

    def consolidate(self, sort_keys: list[str] | None = None) -> pd.DataFrame:
        """Rewrite results.parquet (atomically) from all finished rows, sorted by `sort_keys` then
        point id; return the frame."""
        frame = results_frame(list(self.rows.values()), sort_keys or [])
        write_parquet(self.results_path, frame)
        return frame


def results_frame(rows: list[dict], sort_keys: list[str]) -> pd.DataFrame:
    if not rows:
        return pd.DataFrame({"point_id": pd.Series([], dtype="string")})
    frame = pd.DataFrame(rows)
    keys = [k for k in sort_keys if k in frame.columns] + ["point_id"]
    try:
        frame = frame.sort_values(keys, kind="stable", na_position="last")
    except TypeError:  # a key mixes types across sweeps (e.g. None and numbers): keep point-id order
        frame = frame.sort_values("point_id", kind="stable")
    return frame.reset_index(drop=True)


def read_results(out_dir: Path) -> pd.DataFrame:
    return pd.read_parquet(Path(out_dir) / RESULTS_NAME)


def _read_parts(parts_dir: Path) -> dict[str, dict]:
    """Every readable part. One that cannot be read (not possible after a kill, only after e.g. a
    power cut) counts as unfinished: its point runs again and replaces it."""
    rows = {}
    for path in sorted(parts_dir.glob("*.parquet")):
        if path.name.startswith("."):
            continue
        try:
            records = pd.read_parquet(path).to_dict("records")
        except (OSError, pa.ArrowException):
            continue
        if len(records) == 1 and records[0].get("point_id") == path.stem:
            rows[path.stem] = records[0]
    return rows


def _check_layout(out_dir: Path) -> None:
    """InputError (before any work) when a name the sweep writes is taken by the wrong kind of
    entry: results.parquet or the lock a folder, parts/ a file."""
    for name, folder in ((RESULTS_NAME, False), (LOCK_NAME, False), (PARTS_DIR_NAME, True)):
        path = out_dir / name
        if path.exists() and path.is_dir() != folder:
            kind, wanted = ("a file", "folder") if folder else ("a folder", "file")
            raise InputError("--out", None, f"{path} is {kind}; a sweep keeps its {name} {wanted} there: "
                                            "move it or pick another folder")
    if (out_dir / RESULTS_NAME).exists() and not (out_dir / PARTS_DIR_NAME).is_dir():
        raise InputError("--out", None, f"{out_dir / RESULTS_NAME} is not a sweep's (no {PARTS_DIR_NAME}/ beside it): "
                                        "a sweep rebuilds it from its parts; move it or pick another folder")


def _lock_exclusively(path: Path):
    """One sweep per folder at a time: an advisory lock the kernel drops when the process dies."""
    handle = open(path, "a")  # noqa: SIM115 - held open for the store's lifetime
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise InputError("--out", None,
                         f"another sweep is writing to {path.parent}; wait for it or pick another folder") from None
    return handle


def _remove_stale_temps(out_dir: Path, parts_dir: Path) -> None:
    for folder, prefix in ((parts_dir, "."), (out_dir, f".{RESULTS_NAME}.")):
        for path in folder.iterdir():
            if path.name.startswith(prefix) and path.is_file():
                path.unlink(missing_ok=True)
