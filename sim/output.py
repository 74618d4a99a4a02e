"""Writing a run's files atomically: a temp file in the same folder, then rename.

Nothing already written is lost or left half-written if a run fails or is killed mid-write.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pandas as pd

from sim.errors import InputError


def prepare_out_dir(out_dir: Path) -> Path:
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError("--out", None, f"{out_dir} exists and is not a directory")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError("--out", None, f"cannot create {out_dir} ({exc.strerror})") from None
    return out_dir


def _atomic_write(path: Path, write) -> None:
    handle, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(handle)
    try:
        write(tmp_name)
        os.chmod(tmp_name, 0o666 & ~_umask())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def write_json(path: Path, data: dict) -> None:
    def write(tmp: str) -> None:
        with open(tmp, "w") as f:
            json.dump(data, f, indent=2, default=_default)
            f.write("\n")

    _atomic_write(Path(path), write)


def write_parquet(path: Path, frame: pd.DataFrame) -> None:
    _atomic_write(Path(path), lambda tmp: frame.to_parquet(tmp, index=False))


def write_png(path: Path, figure) -> Path:
    """Save a matplotlib figure as PNG, atomically like every other output."""
    _atomic_write(Path(path), lambda tmp: figure.savefig(tmp, format="png", dpi=110))
    return Path(path)


def _default(value):
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def write_csv(path: Path, frame: pd.DataFrame) -> None:
    """A table as CSV (header row, no index), atomically."""
    _atomic_write(Path(path), lambda tmp: frame.to_csv(tmp, index=False))
