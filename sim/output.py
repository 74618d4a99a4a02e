"""Writing a run's files atomically: each file via a temp file in the same folder, then rename;
a whole run folder via a temporary sibling folder swapped into place (`atomic_run_dir`).

Nothing already written is lost or left half-written if a run fails or is killed mid-write, and
a reader never sees files of two runs side by side.
"""

from __future__ import annotations

import ctypes
import glob
import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from sim.errors import InputError

if TYPE_CHECKING:
    import pandas as pd


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


def write_text(path: Path, text: str) -> None:
    def write(tmp: str) -> None:
        with open(tmp, "w") as f:
            f.write(text)

    _atomic_write(Path(path), write)


def write_parquet(path: Path, frame: pd.DataFrame) -> None:
    _atomic_write(Path(path), lambda tmp: frame.to_parquet(tmp, index=False))


def write_columns_parquet(path: Path, columns: dict) -> None:
    """A table given as {name: values} (numpy arrays or lists, all one length) as parquet, with
    pyarrow alone; read back with pandas it is the DataFrame of those columns."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table(columns)
    _atomic_write(Path(path), lambda tmp: pq.write_table(table, tmp))


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


# ---- whole run folders ---------------------------------------------------------------------------
# A run writes into a temporary sibling `.<name>.partial-<pid>-<token>` and, once every file is
# there, swaps it with --out in one rename (Linux renameat2 RENAME_EXCHANGE; elsewhere two renames
# with a moment where --out is absent, never mixed). A reader sees the old run whole or the new one
# whole. Temporary siblings whose process is gone (a kill -9) are removed by the next run there.

_PARTIAL, _OLD = "partial", "old"


@contextmanager
def atomic_run_dir(out_dir: Path, owned_names: Iterable[str]) -> Iterator[Path]:
    """Yield an empty temporary folder next to `out_dir`; on success it replaces `out_dir` whole,
    on any failure it is removed and `out_dir` is left as it was.

    Checked before the caller does any work: `out_dir` is not a file, is new or empty or a run
    folder (only `owned_names` and dot-files), and its parent is writable (the
    temporary folder is created there). Failures are `InputError` naming --out."""
    out_dir = Path(out_dir).absolute()
    if out_dir.is_symlink():  # replace the folder it points to, not the link
        out_dir = out_dir.resolve()
    _check_replaceable(out_dir, set(owned_names))
    created = _make_parents(out_dir.parent)
    try:
        remove_stale_partials(out_dir)
        tmp = _new_sibling(out_dir, _PARTIAL)
    except BaseException:
        _remove_empty(created)
        raise
    try:
        yield tmp
        _publish(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        _remove_empty(created)
        raise


def _check_replaceable(out_dir: Path, owned: set[str]) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError("--out", None, f"{out_dir} exists and is not a directory")
    if not out_dir.is_dir():
        return
    try:
        foreign = sorted(p.name for p in out_dir.iterdir() if p.name not in owned and not p.name.startswith("."))
    except OSError as exc:
        raise InputError("--out", None, f"cannot list {out_dir} ({exc.strerror})") from None
    if foreign:
        raise InputError("--out", None, f"{out_dir} holds files that are not from a run ({', '.join(foreign[:3])}); a "
                                        "run replaces its folder whole: give a new or empty folder or an earlier run's")


def _make_parents(parent: Path) -> list[Path]:
    """Create `parent` (and its missing ancestors); return those created, deepest first."""
    missing = []
    folder = parent
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    if not folder.is_dir():
        raise InputError("--out", None, f"{folder} is a file, so it cannot hold the {parent.name} folder")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError("--out", None, f"cannot create {exc.filename or parent} ({exc.strerror})") from None
    return missing


def _remove_empty(folders: list[Path]) -> None:
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


def _new_sibling(out_dir: Path, kind: str) -> Path:
    prefix = f".{out_dir.name}.{kind}-{os.getpid()}-"
    try:
        return Path(tempfile.mkdtemp(prefix=prefix, dir=out_dir.parent))
    except OSError as exc:
        raise InputError("--out", None, f"cannot write in {out_dir.parent} ({exc.strerror})") from None


def remove_stale_partials(out_dir: Path) -> list[Path]:
    """Remove the temporary siblings of `out_dir` left by runs whose process is gone; return them."""
    removed = []
    for kind in (_PARTIAL, _OLD):
        for path in out_dir.parent.glob(f".{glob.escape(out_dir.name)}.{kind}-*"):
            pid = path.name[len(f".{out_dir.name}.{kind}-"):].split("-")[0]
            if pid.isdigit() and not _process_alive(int(pid)):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
    return removed


def _process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _publish(tmp: Path, out_dir: Path) -> None:
    """Put `tmp` at `out_dir`: a rename when there is nothing there, else an atomic exchange
    (the old run ends up at `tmp` and is removed)."""
    os.chmod(tmp, 0o777 & ~_umask())
    if not out_dir.exists():
        try:
            os.rename(tmp, out_dir)
            return
        except OSError:
            if not out_dir.exists():
                raise
    if not _exchange(tmp, out_dir):
        old = _new_sibling(out_dir, _OLD)
        os.rename(out_dir, old / "run")
        os.rename(tmp, out_dir)
        tmp = old
    shutil.rmtree(tmp, ignore_errors=True)


_RENAME_EXCHANGE = 2  # linux/fs.h


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux renameat2); False where the system cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    result = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE)
    return result == 0
