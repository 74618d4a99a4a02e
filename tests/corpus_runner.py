"""Run the bad-input corpus (tests/hostile_corpus.py ALL_CASES: the malformed corpus, the issue
cases and every numeric flag's hostile values) in this one process, under an address-space limit.

`python -m tests.corpus_runner RESULTS.json [LIMIT_BYTES [IDS_FILE]]`: sets RLIMIT_AS (so a case
that allocates without bound fails here with MemoryError instead of taking the machine down), then
runs each case (or those whose id is a line of IDS_FILE) in-process through typer's CliRunner, in
a folder of its own that is also the working folder, with a per-case alarm, and writes what each
case did as JSON: {"limit_bytes": ..., "cases": {id: {exit_code, stderr, exception, changed, ...}}}.
tests/test_malformed_corpus.py and bench/bench_bad_input.py start it; `verdict` judges one case.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

CASE_TIMEOUT_S = 60


def _snapshot(folder: Path) -> dict[str, str]:
    """Every file under `folder` (relative name -> content, hex), every folder (-> 'dir'), symlink
    (-> 'link:TARGET', never followed: it may point at /dev/zero) and FIFO (-> 'special', never opened)."""
    found = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        if path.is_symlink():
            found[name] = "link:" + os.readlink(path)
        elif path.is_dir():
            found[name] = "dir"
        elif not path.is_file():  # a FIFO: reading it would block
            found[name] = "special"
        else:
            found[name] = path.read_bytes().hex()
    return found


def _on_alarm(signum, frame):
    raise TimeoutError("case ran past its timeout")


def run_case(case, root: Path, runner, app) -> dict:
    folder = root / case.id
    folder.mkdir()
    for name, content in case.files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if hasattr(content, "make_at"):  # a symlink or FIFO (tests/hostile_corpus.py)
            content.make_at(path)
        else:
            path.write_bytes(content if isinstance(content, bytes) else content.encode())
    before = _snapshot(folder)
    argv = [arg.replace("{d}", str(folder)) for arg in case.argv]
    os.chdir(folder)
    started = time.monotonic()
    signal.alarm(getattr(case, "timeout_s", CASE_TIMEOUT_S))
    try:
        result = runner.invoke(app, argv)
    finally:
        signal.alarm(0)
        wall_s = time.monotonic() - started
        os.chdir(root)
    exception = None if result.exception is None or isinstance(result.exception, SystemExit) else repr(
        result.exception)[:500]
    after = _snapshot(folder)
    return {"exit_code": result.exit_code, "wall_s": round(wall_s, 3), "stderr": result.stderr,
            "stdout_tail": result.stdout[-300:],
            "exception": exception, "changed": sorted(k for k in set(before) | set(after)
                                                      if before.get(k) != after.get(k))}


VERDICTS = ("clean error", "correct run", "traceback", "hang", "silently accepted", "other")
INTERNAL_NAMES = re.compile(r"\b(EngineConfig|EnginePreset|HardwareProfile|ModelSpec|WorkloadSpec|Synthetic|"
                            r"StrictModel|Scheduling|Overhead|CudaGraph)\b|Extra inputs are not permitted")
TEMP_NAMES = re.compile(r"partial-\d|/\.[^/\s]+\.[a-z0-9_]{8}(\.[a-z]+)?\b|/tmp[a-z0-9_]{8}\b")
PY_WARNING = re.compile(r"\b[A-Z][A-Za-z]*Warning: ")  # a Python warning printed to the user


def verdict(case, got: dict) -> str:
    """One of VERDICTS: `clean error` (exit 2, one printable `error: ` line holding the expected
    text, no internal or temporary names, nothing left or changed), `correct run` (a documented
    success: exit 0, no warning shown), `traceback` (an exception escaped), `hang` (the case ran
    past its timeout: a FIFO that blocked an open, a loop without end), `silently accepted`
    (an error was expected, the command exited 0), or `other` (anything else)."""
    from tests.malformed_corpus import OK

    if (got["exception"] or "").startswith("TimeoutError"):
        return "hang"
    if got["exception"] is not None or "Traceback" in got["stderr"] or "Traceback" in got["stdout_tail"]:
        return "traceback"
    if case.expected == OK:
        return "correct run" if got["exit_code"] == 0 and not PY_WARNING.search(got["stderr"]) else "other"
    if got["exit_code"] == 0:
        return "silently accepted"
    lines = got["stderr"].strip().splitlines()
    line = lines[0] if lines else ""
    clean = (got["exit_code"] == 2 and len(lines) == 1 and line.startswith("error: ") and case.expected in line
             and not INTERNAL_NAMES.search(line) and not TEMP_NAMES.search(line) and line.isprintable()
             and got["changed"] == [])
    return "clean error" if clean else "other"


def main(results_path: str, limit_bytes: int, ids_path: str | None = None) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
    signal.signal(signal.SIGALRM, _on_alarm)
    from typer.testing import CliRunner

    from sim.cli import app

    # a home folder of its own: the destination class points writers at `~`, and a writer that failed
    # to refuse it would write into the real one (as `sweep --out ~` did before issue 51)
    real_home = Path.home()  # caches and configs stay where they are (matplotlib's font cache, torch's)
    os.environ.setdefault("XDG_CACHE_HOME", str(real_home / ".cache"))
    os.environ.setdefault("XDG_CONFIG_HOME", str(real_home / ".config"))
    os.environ.setdefault("MPLCONFIGDIR", str(Path(os.environ["XDG_CONFIG_HOME"]) / "matplotlib"))
    os.environ["HOME"] = tempfile.mkdtemp(prefix="corpus-home-")
    from tests.hostile_corpus import ALL_CASES

    wanted = None if ids_path is None else set(Path(ids_path).read_text().split())
    runner = CliRunner()
    results = {}
    with tempfile.TemporaryDirectory(prefix="corpus-") as root:
        for case in ALL_CASES if wanted is None else [c for c in ALL_CASES if c.id in wanted]:
            results[case.id] = run_case(case, Path(root).resolve(), runner, app)
        left = sorted(p.name for p in Path(root).iterdir() if p.name not in results)
    shutil.rmtree(os.environ["HOME"], ignore_errors=True)
    Path(results_path).write_text(json.dumps({"limit_bytes": resource.getrlimit(resource.RLIMIT_AS)[0],
                                              "left_in_root": left, "cases": results}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 4 << 30, sys.argv[3] if len(sys.argv) > 3 else None)
