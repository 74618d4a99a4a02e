"""A whole run folder (`--out D`) written so that nothing of the user's is ever lost.

Checked before any work (`check_out_folder`): D is not a file, not the working folder or one of
its ancestors, and holds only what a run writes (`owned_names`; every other name is foreign, dot
files included: `.git`, `.env`, `.ipynb_checkpoints`), so replacing it can only drop an earlier run.

Then the run writes into a staging folder and publishes it in one step:
- normally the staging folder is a sibling `.<D>.partial-<pid>-<token>` swapped with D in one
  rename (Linux renameat2 RENAME_EXCHANGE; elsewhere two renames with a moment where D is absent,
  never mixed): a reader sees the old run whole or the new one whole;
- when D is a mount point (a container volume: it cannot be renamed) or its parent is not
  writable, the staging folder is inside D (`.infersim-partial-<pid>-<token>`) and each file is
  renamed into D on its own (atomic per file), between removing and rewriting the completion
  marker `.infersim-run`: D holds one whole run exactly when the marker is there.
Publishing runs with SIGINT/SIGTERM held back, so an interrupt lands before or after it, never
inside. Staging folders whose process is gone (a kill -9) are removed by the next run there.
"""

from __future__ import annotations

import ctypes
import errno
import fnmatch
import glob
import json
import os
import shutil
import signal
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from sim.errors import InputError
from sim.output import process_alive, with_normal_mode, write_text
from sim.run.signal_mask import raise_if_interrupted, signals_blocked

_PARTIAL, _OLD = "partial", "old"
MARKER = ".infersim-run"  # in-place folders: present exactly when the folder holds one whole run
_INSIDE_PREFIX = ".infersim-partial-"
_HELD_SIGNALS = {signal.SIGINT, signal.SIGTERM}


@contextmanager
def atomic_run_dir(out_dir: Path, owned_names: Iterable[str], flag: str = "--out") -> Iterator[Path]:
    """Yield an empty staging folder for a run's files; on success they replace `out_dir` whole
    (see the module docstring), on any failure or interrupt the staging folder is removed and
    `out_dir` is left as it was. An interrupt (KeyboardInterrupt) gains `out_dirs`, the folders
    it left as they were, for the one line the CLI prints. Refusals are InputErrors naming `flag`."""
    given = Path(out_dir)  # named in error lines as the user wrote it
    out_dir = given.absolute()
    if out_dir.is_symlink():  # replace the folder it points to, not the link
        out_dir = out_dir.resolve()
    owned = set(owned_names) | {MARKER}
    check_out_folder(out_dir, owned, flag)
    in_place = out_dir.is_dir() and (os.path.ismount(out_dir) or not os.access(out_dir.parent, os.W_OK))
    created = [] if in_place else make_parents(out_dir.parent, flag)
    try:
        remove_stale_partials(out_dir)
        tmp = _new_staging(out_dir, in_place, flag)
    except BaseException:
        remove_empty(created)
        raise
    try:
        yield tmp
        with _signals_held():
            raise_if_interrupted()  # one dropped on the way (sim.run.signal_mask.note_signal) stops the publish
            if in_place:
                _publish_in_place(tmp, out_dir, owned, flag)
            else:
                _publish(tmp, out_dir, owned, flag)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        remove_empty(created)
        if isinstance(exc, KeyboardInterrupt):
            exc.out_dirs = [*getattr(exc, "out_dirs", []), given]
        if isinstance(exc, OSError) and exc.filename and str(exc.filename).startswith(str(tmp)):
            user_path = given / os.path.relpath(exc.filename, tmp)  # the user's path, not the staging folder's
            raise OSError(exc.errno, exc.strerror or str(exc), str(user_path)) from None
        raise


def check_out_folder(out_dir: Path, owned: set[str], flag: str = "--out") -> None:
    """InputError unless `out_dir` may be replaced by a run: new, or a folder holding only
    `owned` names (and this module's staging folders), and not the working folder or above it."""
    out_dir = Path(out_dir).absolute()
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(flag, None, f"{out_dir} exists and is not a directory")
    try:
        cwd = Path.cwd().resolve()
    except OSError:
        cwd = None
    if cwd is not None and (out_dir.resolve() == cwd or out_dir.resolve() in cwd.parents):
        raise InputError(flag, None, f"{out_dir} is the working folder or holds it; a run replaces its folder "
                                     "whole: give a folder of its own (e.g. runs/NAME)")
    if not out_dir.is_dir():
        return
    try:
        names = [p.name for p in out_dir.iterdir()]
    except OSError as exc:
        raise InputError(flag, None, f"cannot list {out_dir} ({exc.strerror})") from None
    foreign = _foreign(names, owned)
    if foreign:
        raise InputError(flag, None, f"{out_dir} holds files that are not from a run ({', '.join(foreign[:3])}); "
                                     "a run replaces its folder whole: give a new or empty folder or an earlier run's")


def make_parents(parent: Path, flag: str) -> list[Path]:
    """Create `parent` (and its missing ancestors); return those created, deepest first."""
    missing = []
    folder = parent
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    if not folder.is_dir():
        raise InputError(flag, None, f"{folder} is a file, so it cannot hold the {parent.name} folder")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(flag, None, f"cannot create {exc.filename or parent} ({exc.strerror})") from None
    return missing


def remove_empty(folders: list[Path]) -> None:
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


def _new_staging(out_dir: Path, in_place: bool, flag: str) -> Path:
    if in_place:
        return _mkdtemp(out_dir, _INSIDE_PREFIX + f"{os.getpid()}-", flag)
    return _new_sibling(out_dir, _PARTIAL, flag)


def _new_sibling(out_dir: Path, kind: str, flag: str = "--out") -> Path:
    return _mkdtemp(out_dir.parent, f".{out_dir.name}.{kind}-{os.getpid()}-", flag)


def _mkdtemp(folder: Path, prefix: str, flag: str) -> Path:
    try:
        return Path(tempfile.mkdtemp(prefix=prefix, dir=folder))
    except OSError as exc:
        raise InputError(flag, None, f"cannot write in {folder} ({exc.strerror})") from None


def remove_stale_partials(out_dir: Path) -> list[Path]:
    """Remove the staging folders of `out_dir` (siblings, or inside it) left by runs whose process
    is gone; return them."""
    found = []
    for kind in (_PARTIAL, _OLD):
        prefix = f".{out_dir.name}.{kind}-"
        found += [(p, p.name[len(prefix):]) for p in out_dir.parent.glob(f"{glob.escape(prefix)}*")]
    if out_dir.is_dir():
        found += [(p, p.name[len(_INSIDE_PREFIX):]) for p in out_dir.glob(f"{_INSIDE_PREFIX}*")]
    removed = []
    for path, rest in found:
        pid = rest.split("-")[0]
        if pid.isdigit() and not process_alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _signals_held():
    """SIGINT/SIGTERM arriving meanwhile are delivered when the block ends (main thread only)."""
    return signals_blocked(_HELD_SIGNALS)


def _foreign(names: Iterable[str], owned: set[str]) -> list[str]:
    """The names not in `owned` (which may hold shell patterns: `sweep_*.png`) nor this module's."""
    return sorted(n for n in names if not n.startswith(_INSIDE_PREFIX)
                  and not any(n == o or fnmatch.fnmatchcase(n, o) for o in owned))


def _refuse_gained(out_dir: Path, names: Iterable[str], owned: set[str], flag: str) -> None:
    """The check at the swap: a name that appeared in the folder during the run (a file the user
    wrote there meanwhile, another command's output) stops the publish; nothing is lost."""
    foreign = _foreign(names, owned)
    if foreign:
        raise InputError(flag, None, f"{out_dir} gained files during the run ({', '.join(foreign[:3])}); "
                                     "nothing written, the folder left as it was: give a new folder")


def _publish(tmp: Path, out_dir: Path, owned: set[str], flag: str = "--out") -> None:
    """Put `tmp` at `out_dir`: a rename when there is nothing there, else an atomic exchange
    (the old run ends up at `tmp` and is removed, unless it holds a name the run did not write:
    then it is exchanged back). A folder that cannot be renamed (a mount point not recognised as
    one, e.g. a bind mount) gets the in-place publish instead."""
    with_normal_mode(tmp, folder=True)
    if not out_dir.exists():
        try:
            os.rename(tmp, out_dir)
            return
        except OSError:
            if not out_dir.exists():
                raise
    try:
        exchanged = _exchange(tmp, out_dir)
        if exchanged and _foreign(os.listdir(tmp), owned):
            _exchange(tmp, out_dir)  # back: the new run is at tmp again, removed by the caller
            _refuse_gained(out_dir, os.listdir(out_dir), owned, flag)
        if not exchanged:
            old = _new_sibling(out_dir, _OLD)
            os.rename(out_dir, old / "run")
            if _foreign(os.listdir(old / "run"), owned):
                os.rename(old / "run", out_dir)
                old.rmdir()
                _refuse_gained(out_dir, os.listdir(out_dir), owned, flag)
            os.rename(tmp, out_dir)
            tmp = old
    except OSError as exc:
        if exc.errno not in (errno.EBUSY, errno.EXDEV, errno.EPERM, errno.EACCES):
            raise
        _publish_in_place(tmp, out_dir, owned, flag)
    shutil.rmtree(tmp, ignore_errors=True)


def _publish_in_place(staging: Path, out_dir: Path, owned: set[str], flag: str = "--out") -> None:
    """Move the staged files into `out_dir` one atomic rename each (a copy first when the staging
    folder is elsewhere), drop the earlier run's files this run did not write, and mark the
    folder whole again. Between the marker's removal and its return the folder is marked partial.
    A name the run did not write that appeared meanwhile stops it first."""
    _refuse_gained(out_dir, os.listdir(out_dir), owned, flag)
    new_names = sorted(p.name for p in staging.iterdir())
    (out_dir / MARKER).unlink(missing_ok=True)
    for name in new_names:
        source = staging / name
        if source.parent.parent != out_dir:  # staged elsewhere: copy next to the target first
            copy = out_dir / f"{_INSIDE_PREFIX}{os.getpid()}-copy-{name}"
            shutil.copyfile(source, copy)
            source = copy
        with_normal_mode(source)
        os.replace(source, out_dir / name)
    for name in owned - set(new_names) - {MARKER}:
        (out_dir / name).unlink(missing_ok=True)
    write_text(out_dir / MARKER, json.dumps({"files": new_names}) + "\n")
    shutil.rmtree(staging, ignore_errors=True)


_RENAME_EXCHANGE = 2  # linux/fs.h


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux renameat2); False where the system cannot. An OSError
    when the system can but this pair cannot be swapped (EBUSY: a mount point)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    result = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE)
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL):
        return False
    raise OSError(code, os.strerror(code), str(b))
