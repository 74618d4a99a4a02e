"""Run every case of tests/malformed_corpus.py in this one process, under an address-space limit.

`python -m tests.corpus_runner RESULTS.json [LIMIT_BYTES]`: sets RLIMIT_AS (so a case that
allocates without bound fails here with MemoryError instead of taking the machine down), then
runs each case in-process through typer's CliRunner, in a folder of its own that is also the
working folder, with a per-case alarm, and writes what each case did as JSON:
{"limit_bytes": ..., "cases": {id: {exit_code, stderr, exception, changed, entries}}}.
tests/test_malformed_corpus.py starts it and judges the results.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import tempfile
from pathlib import Path

CASE_TIMEOUT_S = 60


def _snapshot(folder: Path) -> dict[str, str]:
    """Every file under `folder` (relative name -> content, hex) and every folder (-> 'dir')."""
    found = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        found[name] = "dir" if path.is_dir() and not path.is_symlink() else path.read_bytes().hex()
    return found


def _on_alarm(signum, frame):
    raise TimeoutError(f"case ran past {CASE_TIMEOUT_S} s")


def run_case(case, root: Path, runner, app) -> dict:
    folder = root / case.id
    folder.mkdir()
    for name, content in case.files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    before = _snapshot(folder)
    argv = [arg.replace("{d}", str(folder)) for arg in case.argv]
    os.chdir(folder)
    signal.alarm(CASE_TIMEOUT_S)
    try:
        result = runner.invoke(app, argv)
    finally:
        signal.alarm(0)
        os.chdir(root)
    exception = None if result.exception is None or isinstance(result.exception, SystemExit) else repr(
        result.exception)[:500]
    after = _snapshot(folder)
    return {"exit_code": result.exit_code, "stderr": result.stderr, "stdout_tail": result.stdout[-300:],
            "exception": exception, "changed": sorted(k for k in set(before) | set(after)
                                                      if before.get(k) != after.get(k))}


def main(results_path: str, limit_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
    signal.signal(signal.SIGALRM, _on_alarm)
    from typer.testing import CliRunner

    from sim.cli import app
    from tests.malformed_corpus import CASES

    runner = CliRunner()
    results = {}
    with tempfile.TemporaryDirectory(prefix="corpus-") as root:
        for case in CASES:
            results[case.id] = run_case(case, Path(root).resolve(), runner, app)
        left = sorted(p.name for p in Path(root).iterdir() if p.name not in results)
    Path(results_path).write_text(json.dumps({"limit_bytes": resource.getrlimit(resource.RLIMIT_AS)[0],
                                              "left_in_root": left, "cases": results}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 4 << 30)
