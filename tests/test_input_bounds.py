"""The shared input guards of issue 26: strict numbers (sim/numbers.py), the allocation budget
(sim/inputs/budget.py), alias-free YAML (sim/yamlio.py), escaped error lines, Ray's unreachable
address. The malformed corpus (tests/malformed_corpus.py) drives them through every command;
these pin the helpers' own contracts."""

from __future__ import annotations

import socket
import time

import pytest

from sim.cli.errors import printable
from sim.errors import InputError
from sim.inputs.budget import MAX_TOTAL_TOKENS, require
from sim.numbers import strict_number
from sim.yamlio import load_yaml, read_mapping


@pytest.mark.parametrize("value", ["abc", None, True, "1e400", 1e400, "nan", float("nan"), "inf", "-inf", "", [1],
                                   "0x10", "1,000"])
def test_strict_number_refuses_what_is_not_a_finite_number(value):
    with pytest.raises(InputError, match=r"^f\.json: key: must be a finite number"):
        strict_number(value, "f.json", "key")


@pytest.mark.parametrize("value, low, high", [("0", 1, 10), ("11", 1, 10), ("-1", 0, None), (1e19, 1, 2**63 - 1),
                                              ("10000000000000000000", 1, 2**63 - 1), ("1.5", 1, 10)])
def test_strict_whole_numbers_stay_in_range(value, low, high):
    with pytest.raises(InputError, match="must be a whole number"):
        strict_number(value, "--bench", "isl", whole=True, low=low, high=high)


def test_strict_number_reads_what_it_should():
    assert strict_number("1e3", "w", "f", whole=True, low=1, high=10**4) == 1000
    assert type(strict_number("1e3", "w", "f", whole=True)) is int
    assert strict_number(" 12 ", "w", "f", whole=True) == 12
    assert strict_number(2**62, "w", "f", whole=True) == 2**62  # exact, not through a float
    assert strict_number("0.25", "w", "f", low=0.0, high=1.0) == 0.25
    with pytest.raises(InputError, match=r"> 0"):
        strict_number("0", "w", "f", low=0.0, low_open=True)


def test_budget_names_the_inputs_of_the_product():
    require(MAX_TOTAL_TOKENS, MAX_TOTAL_TOKENS, "tokens", "requests x isl")  # at the limit: fine
    with pytest.raises(InputError) as refused:
        require(MAX_TOTAL_TOKENS + 1, MAX_TOTAL_TOKENS, "tokens", "requests x isl", "--bench")
    assert refused.value.line().startswith("--bench: requests x isl: asks for 1,000,000,000,001 tokens")
    with pytest.raises(InputError, match="infinitely many"):
        require(float("inf"), 10, "tokens", "x")


def _alias_bomb(levels: int = 10) -> str:
    text = "a0: &a0 [x, x, x, x, x, x, x, x, x]\n"
    for i in range(1, levels):
        text += f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]\n"
    return text + f"replica_hardware: *a{levels - 1}\n"


def test_the_alias_bomb_is_refused_in_under_a_second(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(_alias_bomb())
    assert len(path.read_bytes()) < 500  # 9**10 = 3.5e9 items once expanded
    start_s = time.perf_counter()
    with pytest.raises(InputError, match=r"bomb\.yaml: not valid YAML \(aliases \(\*name\) are not accepted, line 2"):
        read_mapping(path)
    assert time.perf_counter() - start_s < 1.0


def test_yaml_without_aliases_reads_as_safe_load_does():
    assert load_yaml("a: [1, 2.5, true, null, x]\nb: {c: .inf}\n") == {"a": [1, 2.5, True, None, "x"],
                                                                       "b": {"c": float("inf")}}
    assert load_yaml("a: &anchor 3\n") == {"a": 3}  # an anchor alone shares nothing


@pytest.mark.parametrize("raw, shown", [("a\x1b[31mb", "a\\x1b[31mb"), ("a\nb", "a\\nb"), ("a\u202eb", "a\\u202eb"),
                                        ("tab\there", "tab\\there"), ("naïve ✓", "naïve ✓")])
def test_error_lines_escape_control_characters(raw, shown):
    assert printable(raw) == shown


def test_an_unreachable_ray_address_is_one_line_at_once():
    pytest.importorskip("ray")
    from sim.run.ray_connect import check_reachable

    with socket.socket() as probe:  # a port nothing listens on: bind, then close
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    start_s = time.perf_counter()
    with pytest.raises(InputError, match=rf"^--address: cannot reach a Ray cluster at 127\.0\.0\.1:{port}"):
        check_reachable(f"127.0.0.1:{port}")
    assert time.perf_counter() - start_s < 6
    check_reachable("auto")  # forms Ray resolves itself are left to it
