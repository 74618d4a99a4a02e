"""Where a command writes: every output path of every command is claimed here, before any work.

A destination is a run folder (`--out D` of simulate, plan, day run / plan, pool plan, sweep) or a
file (`--csv`, `workload sample --out x.jsonl`, `calibrate * --out x.yaml`). `claim_outputs`
refuses, with one line naming the flag and the path (exit 2), before anything is computed:

- an output that is an input of the same command (`simulate --trace t.csv --csv t.csv`), a folder
  that holds an input, or a file inside a folder the same command replaces whole
  (`--out D --csv D/summary.json`), or two outputs at one path;
- a folder that is `/`, the home folder, the working folder or one that holds either, or that holds
  names the command does not write (`sim.run.folder.check_out_folder`: dot-files are foreign);
- a symlink whose target is in another folder (the write would land somewhere the user did not
  name), and a path that is a FIFO, a device or anything else that is not a plain file or folder;
- a destination another infersim process is writing (a lock per destination, `.NAME.lock` beside
  it, held until the command ends; the kernel drops it when a process dies).

Staging leftovers of killed runs (`.NAME.partial-PID-*`, files and folders) are removed here when
their process is gone. The writing itself stays where it was: `sim.output` (one file, atomic) and
`sim.run.folder.atomic_run_dir` (a folder swapped in whole, re-checked at the swap).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from sim.errors import InputError
from sim.output import remove_stale_staged_files
from sim.run.folder import MARKER, check_out_folder, make_parents, remove_empty, remove_stale_partials


@dataclass(frozen=True)
class FolderOut:
    """A run folder replaced whole: `owned` are the names the command writes there."""

    flag: str
    path: Path
    owned: tuple[str, ...]


@dataclass(frozen=True)
class FileOut:
    """One file, replaced atomically."""

    flag: str
    path: Path


def lock_path(destination: Path) -> Path:
    """`.NAME.lock` beside the destination: outside a folder that is swapped away whole."""
    destination = Path(destination).absolute()
    return destination.parent / f".{destination.name}.lock"


@contextlib.contextmanager
def claim_outputs(folders: Iterable[FolderOut] = (), files: Iterable[FileOut] = (),
                  inputs: Iterable[Path | str] = ()) -> Iterator[None]:
    """Check every destination (module docstring) and hold its lock for the block; remove the
    staging leftovers of dead runs. InputError (before any work) when one cannot be written."""
    folders = [f for f in folders if f.path is not None]
    files = [f for f in files if f.path is not None]
    input_paths = [_real(Path(p)) for p in inputs if _is_existing_path(p)]
    for out in folders:
        check_folder_destination(out, input_paths)
    for out in files:
        check_file_destination(out, input_paths)
    _check_apart(folders, files)
    with contextlib.ExitStack() as locks:
        for out in folders:  # a new folder's missing parents now, so its lock has a place (gone again if unused)
            locks.callback(remove_empty, make_parents(Path(out.path).absolute().parent, out.flag))
        for out in [*folders, *files]:
            locks.enter_context(destination_lock(out.path, out.flag))
        for out in folders:
            remove_stale_partials(Path(out.path).absolute())
        for out in files:
            remove_stale_staged_files(Path(out.path).absolute())
        yield


def check_folder_destination(out: FolderOut, inputs: list[Path]) -> None:
    path = Path(out.path).absolute()
    _refuse_odd_entry(path, out.flag, folder=True)
    _refuse_symlink_elsewhere(path, out.flag)
    real = _real(path)
    home = _home()
    if real == Path(real.anchor) or (home is not None and (real == home or real in home.parents)):
        raise InputError(out.flag, None, f"{path} is the root or home folder or holds it; a run replaces its folder "
                                         "whole: give a folder of its own (e.g. runs/NAME)")
    check_out_folder(path, set(out.owned) | {MARKER}, out.flag)
    for source in inputs:
        if source == real or real in source.parents:
            raise InputError(out.flag, None, f"{path} holds {source}, an input of this run; a run replaces its "
                                             "folder whole: give another folder")


def check_file_destination(out: FileOut, inputs: list[Path]) -> None:
    path = Path(out.path).absolute()
    _refuse_odd_entry(path, out.flag, folder=False)
    _refuse_symlink_elsewhere(path, out.flag)
    if path.is_dir():
        raise InputError(out.flag, None, f"{path} is a folder; give a file name")
    if not path.parent.is_dir():
        raise InputError(out.flag, None, f"the folder {path.parent} does not exist")
    if not os.access(path.parent, os.W_OK):
        raise InputError(out.flag, None, f"cannot write in {path.parent} (permission denied)")
    real = _real(path)
    if real in inputs:
        raise InputError(out.flag, None, f"{path} is an input of this run; writing it would replace it: "
                                         "give another file")


def _check_apart(folders: list[FolderOut], files: list[FileOut]) -> None:
    """No output inside (or at) another: a file in a folder swapped away whole would vanish with it."""
    outs = [(o.flag, o.path, _real(Path(o.path).absolute())) for o in [*folders, *files]]
    for folder in folders:
        real = _real(Path(folder.path).absolute())
        for flag, path, other in outs:
            if flag == folder.flag:
                continue
            if other == real or real in other.parents:
                raise InputError(flag, None, f"{path} is inside {folder.flag} {folder.path}, which the run replaces "
                                             "whole: give a path outside it")
    seen: dict[Path, str] = {}
    for flag, path, real in outs:
        if real in seen:
            raise InputError(flag, None, f"{path} is also the {seen[real]} output; give each its own path")
        seen[real] = flag


@contextlib.contextmanager
def destination_lock(destination: Path, flag: str) -> Iterator[None]:
    """An exclusive advisory lock on `.NAME.lock` beside `destination` for the block (the kernel
    drops it when the process dies). The lock file is removed on the way out; a process that
    locked a file already removed tries again, so two writers never both hold one."""
    path = lock_path(destination)
    while True:
        try:
            handle = open(path, "a+")  # noqa: SIM115 - held for the block
        except OSError:
            yield  # a folder we cannot write beside (a mount point's parent): the in-place publish, unlocked
            return
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip()
            handle.close()
            who = f" (pid {holder})" if holder.isdigit() else ""
            raise InputError(flag, None, f"another infersim command{who} is writing {destination}; wait for it or "
                                         "give another path") from None
        if _same_file(handle, path):
            break
        handle.close()
    try:
        handle.truncate(0)
        handle.write(str(os.getpid()))
        handle.flush()
        yield
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
        handle.close()


def _same_file(handle, path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(handle.fileno()), os.stat(path))
    except OSError:
        return False


def _refuse_odd_entry(path: Path, flag: str, folder: bool) -> None:
    """A FIFO, device or socket at the destination is refused (a run never writes into one)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise InputError(flag, None, f"{path} is not a {'folder' if folder else 'file'} (a FIFO, device or socket); "
                                     "give a path of a plain one")


def _refuse_symlink_elsewhere(path: Path, flag: str) -> None:
    if not path.is_symlink():
        return
    target = _real(path)
    if target.parent != _real(path.parent):
        raise InputError(flag, None, f"{path} is a symlink into another folder ({target.parent}); give the real "
                                     "path or another name")


def _real(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a symlink loop: compared as written
        return path.absolute()


def _home() -> Path | None:
    try:
        return _real(Path.home())
    except (KeyError, RuntimeError, OSError):  # no HOME and no password entry
        return None


def _is_existing_path(value) -> bool:
    if not isinstance(value, (str, os.PathLike)) or not str(value) or "\x00" in str(value):
        return False
    try:
        return os.path.exists(value)
    except (OSError, ValueError):
        return False
