"""Writing a run's files atomically: each file via a temp file in the same folder, then rename;
a whole run folder via `sim.run.folder.atomic_run_dir`.

Nothing already written is lost or left half-written if a run fails or is killed mid-write, and
a reader never sees files of two runs side by side.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable, Iterator
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


STAGING_TAG = "partial"  # `.NAME.partial-PID-XXXX`: a file or folder being written for NAME by process PID


def staging_file(path: Path, suffix: str = "") -> str:
    """A new empty file `.NAME.partial-PID-XXXX` beside `path`, for writing `path` atomically;
    a killed writer's one is removed by the next command writing `path` (`remove_stale_staged_files`).
    An OSError names `path` (the user's), never the temporary file."""
    path = Path(path)
    try:
        handle, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.{STAGING_TAG}-{os.getpid()}-", suffix=suffix,
                                            dir=path.parent)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    os.close(handle)
    return tmp_name


def remove_stale_staged_files(path: Path) -> list[Path]:
    """Remove the staging files of `path` (`staging_file`) whose process is gone; return them."""
    path = Path(path)
    prefix = f".{path.name}.{STAGING_TAG}-"
    removed = []
    try:
        siblings = [p for p in path.parent.iterdir() if p.name.startswith(prefix)]
    except OSError:
        return removed
    for sibling in siblings:
        pid = sibling.name[len(prefix):].split("-")[0]
        if pid.isdigit() and not process_alive(int(pid)) and not sibling.is_dir():
            sibling.unlink(missing_ok=True)
            removed.append(sibling)
    return removed


def process_alive(pid: int) -> bool:
    """Whether process `pid` exists (this one included; one of another user's counts as alive)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def atomic_write(path: Path, write) -> None:
    """`write(tmp)` into a staging file next to `path`, then rename it into place. An OSError
    names `path` (the user's), never the temporary file; on any failure the staging file goes."""
    path = Path(path)
    tmp_name = staging_file(path)
    try:
        write(tmp_name)
        with_normal_mode(tmp_name)
        os.replace(tmp_name, path)
    except OSError as exc:
        Path(tmp_name).unlink(missing_ok=True)
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def with_normal_mode(path, folder: bool = False) -> None:
    """Give a file made by `tempfile` (0600, 0700) the mode a plain `open` would: 0666 (0777 for
    a folder) less the umask, so the files of a run are as readable as any other the user makes."""
    os.chmod(path, (0o777 if folder else 0o666) & ~_umask())


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

    atomic_write(Path(path), write)


def write_text(path: Path, text: str) -> None:
    def write(tmp: str) -> None:
        with open(tmp, "w") as f:
            f.write(text)

    atomic_write(Path(path), write)


def write_parquet(path: Path, frame: pd.DataFrame) -> None:
    atomic_write(Path(path), lambda tmp: frame.to_parquet(tmp, index=False))


def write_columns_parquet(path: Path, columns: dict) -> None:
    """A table given as {name: values} (numpy arrays or lists, all one length) as parquet, with
    pyarrow alone; read back with pandas it is the DataFrame of those columns."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({name: arrow_column(values) for name, values in columns.items()})
    atomic_write(Path(path), lambda tmp: pq.write_table(table, tmp))


def arrow_column(values):
    """`pyarrow.array(values)` for a numpy array of numbers or a sequence of str/None, built from
    buffers: Arrow's own conversion of Python or numpy values imports pandas (~0.2 s) on first
    use. Numbers are used in place; text becomes a dictionary of its distinct values, decoded by
    Arrow; no text at all (only None, or nothing) is Arrow's null type. Anything else goes through
    `pyarrow.array`."""
    import numpy as np
    import pyarrow as pa

    arrow_type = {"i": {8: pa.int64(), 4: pa.int32()}, "f": {8: pa.float64(), 4: pa.float32()}}
    if isinstance(values, np.ndarray) and values.ndim == 1 and values.dtype.isnative:
        kind = arrow_type.get(values.dtype.kind, {}).get(values.dtype.itemsize)
        if kind is not None:
            return pa.Array.from_buffers(kind, len(values), [None, pa.py_buffer(np.ascontiguousarray(values))])
    items = values.tolist() if isinstance(values, np.ndarray) and values.dtype.kind in "UO" else values
    if not isinstance(items, list) or not all(item is None or type(item) is str for item in items):
        return pa.array(values)
    codes: dict[str, int] = {}
    if all(item is None for item in items):  # what Arrow infers for them: the null type
        return pa.nulls(len(items))
    indices = np.fromiter((-1 if item is None else codes.setdefault(item, len(codes)) for item in items),
                          dtype=np.int32, count=len(items))
    text = [word.encode() for word in codes]
    offsets = np.zeros(len(text) + 1, dtype=np.int32)
    np.cumsum([len(word) for word in text], out=offsets[1:])
    dictionary = pa.Array.from_buffers(pa.string(), len(text), [None, pa.py_buffer(offsets),
                                                                pa.py_buffer(b"".join(text))])
    valid = indices >= 0
    mask = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    indices = pa.Array.from_buffers(pa.int32(), len(items), [mask, pa.py_buffer(np.maximum(indices, 0))],
                                    null_count=int(len(items) - np.count_nonzero(valid)))
    return pa.DictionaryArray.from_arrays(indices, dictionary).dictionary_decode()


def write_png(path: Path, figure) -> Path:
    """Save a matplotlib figure as PNG, atomically like every other output."""
    atomic_write(Path(path), lambda tmp: figure.savefig(tmp, format="png", dpi=110))
    return Path(path)


def _default(value):
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def write_csv(path: Path, frame: pd.DataFrame) -> None:
    """A table as CSV (header row, no index), atomically."""
    atomic_write(Path(path), lambda tmp: frame.to_csv(tmp, index=False))


def check_file_target(path: Path, flag: str) -> None:
    """InputError (naming `flag`) unless a file can be written at `path`: not a folder, in an
    existing folder. Called before any work, so a run never fails at its last step."""
    path = Path(path)
    if path.is_dir():
        raise InputError(flag, None, f"{path} is a folder; give a file name")
    if not path.parent.is_dir():
        raise InputError(flag, None, f"the folder {path.parent} does not exist")
    if not os.access(path.parent, os.W_OK):
        raise InputError(flag, None, f"cannot write in {path.parent} (permission denied)")


@contextmanager
def staged_files() -> Iterator[Callable]:
    """`stage(path, write)` writes a file now, next to `path` under a temporary name (returned,
    with `path`'s suffix); when the
    block ends without error every staged file is renamed into place, on any error or interrupt
    they are removed. Lets a command write a file beside its atomic run folder within the same
    step: nothing is published unless everything was written."""
    staged: list[tuple[str, Path]] = []

    def stage(path: Path, write) -> Path:
        path = Path(path)
        tmp_name = staging_file(path, path.suffix)  # the same suffix: a staged YAML reads back as one
        staged.append((tmp_name, path))
        try:
            write(tmp_name)
            with_normal_mode(tmp_name)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None
        return Path(tmp_name)

    try:
        yield stage
    except BaseException:
        for tmp_name, _ in staged:
            Path(tmp_name).unlink(missing_ok=True)
        raise
    for tmp_name, path in staged:
        os.replace(tmp_name, path)

