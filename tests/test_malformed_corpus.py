"""Every case of tests/malformed_corpus.py: one line on stderr and exit 2 (or the documented
success), no traceback, and nothing left behind: the case folder holds exactly the files it
started with (no --out folder, no temporary sibling, no sweep lock)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from sim.cli import app
from tests.malformed_corpus import CASES, OK


def test_corpus_is_large_and_ids_are_unique():
    assert len(CASES) >= 60
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_case(tmp_path, case):
    for name, content in case.files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    argv = [arg.replace("{d}", str(tmp_path)) for arg in case.argv]
    result = CliRunner().invoke(app, argv)
    assert "Traceback" not in result.output and "Traceback" not in result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    if case.expected == OK:
        assert result.exit_code == 0, result.output
        return
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert case.expected in lines[0], lines[0]
    after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert after == before, "a failed command left or changed files"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted({n.split("/")[0] for n in case.files})
