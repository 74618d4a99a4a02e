"""Every `infersim` command in the README runs as written (the tour's code block and the vLLM
table), at a stable load (no overload warning), and every page the README links exists."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sim.cli import app

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_commands() -> list[str]:
    text = README.read_text()
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith("infersim "):
                commands.append(line)
    commands += [span for span in re.findall(r"`(infersim [^`]+)`", text)]
    return commands


def test_the_two_commands_stay():
    text = README.read_text()
    assert "make demo   # sets up .venv" in text and "make test   # sets up .venv" in text


def test_readme_links_exist():
    for target in re.findall(r"\]\(([^)#]+)\)", README.read_text()):
        assert (README.parent / target).exists(), target


@pytest.mark.parametrize("command", readme_commands())
def test_readme_command_runs_at_a_stable_load(command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # outputs go to a scratch folder; the repository's own files (a user
    # runs the README from the clone) are named by their path from the repository root
    args = [str(README.parent / arg) if "/" in arg and (README.parent / arg).is_file() else arg
            for arg in shlex.split(command)[1:]]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, f"{command}\n{result.output}"
    assert "offered load exceeds capacity" not in result.output and "overloaded" not in result.output, command
    for out in re.findall(r"--out (\S+)", command):
        assert (tmp_path / out).is_dir(), out


def test_the_tour_and_the_table_are_all_there():
    commands = readme_commands()
    assert len(commands) >= 13 and sum(c.startswith("infersim simulate") for c in commands) >= 7
