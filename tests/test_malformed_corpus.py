"""The bad-input corpus (tests/hostile_corpus.py: the malformed corpus, the issue cases and, for
speed, the huge / NaN / -1 values of every numeric flag; bench/bench_bad_input.py runs all of
them and prints the table): one line on stderr and exit 2 (or the documented
success), no traceback, never an internal model's name or a temporary file's, and nothing left
behind or changed: the case folder holds exactly the files it started with (no --out folder, no
temporary sibling, no sweep lock).

The cases run in ONE subprocess (tests/corpus_runner.py) under an address-space limit
(RLIMIT_AS), each in-process through typer's CliRunner: a case that allocates without bound fails
there instead of taking the machine down, and the corpus stays fast (one interpreter start)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.corpus_runner import INTERNAL_NAMES, TEMP_NAMES, verdict
from tests.destination_corpus import DESTINATION_CASES, WRITERS, output_flags_of_cli
from tests.hostile_corpus import ALL_CASES, NUMERIC_CASES
from tests.malformed_corpus import OK

FAST_VALUES = ("=1e308", "=nan", "=huge", "=-1")  # of the numeric cases, the test runs these (the bench all)
# of the reader cases (tests/reader_corpus.py), every FIFO, /dev/zero, folder, deep and repeated-key
# case and the quantization_config fields; the wrong type of every top-level field is the bench's;
# of the physical-field cases (tests/bounds_corpus.py), x 10^3 and 1e300 (x 10^9 is the bench's)
CASES = [c for c in ALL_CASES if (c not in NUMERIC_CASES or c.id.endswith(FAST_VALUES))
         and not c.id.startswith("reader-type-") and not c.id.endswith("-x1e9")]

ROOT = Path(__file__).resolve().parents[1]
LIMIT_BYTES = 4 << 30  # address space of the runner: a few times what a case needs (~1.7 GiB peak)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict:
    results = tmp_path_factory.mktemp("corpus") / "results.json"
    # one BLAS/OpenMP thread: their per-thread buffers would make the address space grow with the core count
    env = {**os.environ, **{name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}}
    ids = results.with_name("ids.txt")
    ids.write_text("\n".join(c.id for c in CASES))
    done = subprocess.run([sys.executable, "-m", "tests.corpus_runner", str(results), str(LIMIT_BYTES), str(ids)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(results.read_text())
    assert data["limit_bytes"] == LIMIT_BYTES  # the limit was in force
    assert data["left_in_root"] == []  # nothing written outside the case folders
    return data["cases"]


def test_corpus_is_large_and_ids_are_unique():
    assert len(ALL_CASES) >= 900 and len(NUMERIC_CASES) >= 400  # every numeric flag of every command
    assert len({c.id for c in ALL_CASES}) == len(ALL_CASES)


def test_every_case_is_a_clean_error_or_a_correct_run(outcomes):
    verdicts = {c.id: verdict(c, outcomes[c.id]) for c in CASES}
    assert {v for v in verdicts.values()} <= {"clean error", "correct run"}, {
        k: v for k, v in verdicts.items() if v not in ("clean error", "correct run")}


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


def test_every_output_flag_of_the_cli_is_in_the_destination_class():
    """A writer added to the CLI without a row in WRITERS fails here (its dangerous destinations untried)."""
    assert output_flags_of_cli() == set(WRITERS)
    assert len(DESTINATION_CASES) >= 7 * len(WRITERS)
