"""Writing a run's files atomically: a temp file in the same folder, then rename.

Nothing already written is lost or left half-written if a run fails or is killed mid-write.
"""

from __future__ import annotations

import json
import math
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


def json_safe(data):
    """`data` with every non-finite float (NaN, inf: a statistic of nothing, a rate over 0 s)
    replaced by None, and numpy scalars/arrays as Python values, so the JSON is always valid."""
    if isinstance(data, dict):
        return {key: json_safe(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [json_safe(value) for value in data]
    if hasattr(data, "tolist") and not isinstance(data, (str, bytes)):
        return json_safe(data.tolist())
    if isinstance(data, float) and not math.isfinite(data):
        return None
    return data


def json_text(data) -> str:
    """Strict JSON (no NaN/Infinity tokens), indented; non-finite numbers become null."""
    return json.dumps(json_safe(data), indent=2, allow_nan=False, default=_default) + "\n"


def write_json(path: Path, data: dict) -> None:
    text = json_text(data)

    def write(tmp: str) -> None:
        with open(tmp, "w") as f:
            f.write(text)

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
