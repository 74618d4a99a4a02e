"""Every case of tests/malformed_corpus.py: one line on stderr and exit 2 (or the documented
success), no traceback, never an internal model's name or a temporary file's, and nothing left
behind or changed: the case folder holds exactly the files it started with (no --out folder, no
temporary sibling, no sweep lock).

The cases run in ONE subprocess (tests/corpus_runner.py) under an address-space limit
(RLIMIT_AS), each in-process through typer's CliRunner: a case that allocates without bound fails
there instead of taking the machine down, and the corpus stays fast (one interpreter start)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.malformed_corpus import CASES, OK

ROOT = Path(__file__).resolve().parents[1]
LIMIT_BYTES = 4 << 30  # address space of the runner: a few times what a case needs (~1.7 GiB peak)
INTERNAL_NAMES = re.compile(r"\b(EngineConfig|EnginePreset|HardwareProfile|ModelSpec|WorkloadSpec|Synthetic|"
                            r"StrictModel|Scheduling|Overhead|CudaGraph)\b|Extra inputs are not permitted")
TEMP_NAMES = re.compile(r"partial-\d|/\.[^/\s]+\.[a-z0-9_]{8}(\.[a-z]+)?\b|/tmp[a-z0-9_]{8}\b")


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict:
    results = tmp_path_factory.mktemp("corpus") / "results.json"
    # one BLAS/OpenMP thread: their per-thread buffers would make the address space grow with the core count
    env = {**os.environ, **{name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}}
    done = subprocess.run([sys.executable, "-m", "tests.corpus_runner", str(results), str(LIMIT_BYTES)], cwd=ROOT,
                          capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(results.read_text())
    assert data["limit_bytes"] == LIMIT_BYTES  # the limit was in force
    assert data["left_in_root"] == []  # nothing written outside the case folders
    return data["cases"]


def test_corpus_is_large_and_ids_are_unique():
    assert len(CASES) >= 250
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_case(outcomes, case):
    got = outcomes[case.id]
    assert got["exception"] is None, got["exception"]
    assert "Traceback" not in got["stderr"] and "Traceback" not in got["stdout_tail"]
    if case.expected == OK:
        assert got["exit_code"] == 0, got["stderr"]
        return
    lines = got["stderr"].strip().splitlines()
    assert got["exit_code"] == 2, got["stderr"] + got["stdout_tail"]
    assert len(lines) == 1 and lines[0].startswith("error: "), got["stderr"]
    assert case.expected in lines[0], lines[0]
    assert not INTERNAL_NAMES.search(lines[0]), lines[0]
    assert not TEMP_NAMES.search(lines[0]), lines[0]
    assert all(c.isprintable() for c in lines[0]), repr(lines[0])
    assert got["changed"] == [], f"a failed command left or changed {got['changed']}"
