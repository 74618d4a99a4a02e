"""The bounded readers of sim/yamlio.py (issue 51 item 2) and the bounds that keep numpy's
warnings from reaching the user (item 5): the contracts, each with the case that broke it.
tests/reader_corpus.py runs every reader of the CLI through the same classes."""

from __future__ import annotations

import json
import os
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from sim.errors import InputError
from sim.fleet.profile import SeriesRate
from sim.validate.measured.load import load_measured
from sim.yamlio import MAX_NESTING, json_nested_too_deep, parse_json, parse_yaml, read_mapping, read_text_bounded


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "c.yaml"
    os.mkfifo(fifo)
    done = []
    worker = threading.Thread(target=lambda: done.append(_error(read_mapping, fifo)), daemon=True)
    worker.start()
    worker.join(5)
    assert done and "is not a file but a FIFO" in done[0]  # no writer ever opens it: an open would block forever


def test_devices_and_folders_are_refused_from_stat(tmp_path):
    zero = tmp_path / "config.json"
    zero.symlink_to("/dev/zero")
    started = time.monotonic()
    assert "is not a file but a device" in _error(read_mapping, zero)
    assert time.monotonic() - started < 1
    assert "is not a file but a folder" in _error(read_mapping, tmp_path)
    assert "cannot read file (no such file)" in _error(read_mapping, tmp_path / "missing.yaml")


def test_size_is_bounded_before_the_file_is_read_whole(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_bytes(b"a: 1\n" + b"#" * 2048)
    assert "larger than the limit" in _error(lambda p: read_text_bounded(p, max_bytes=1024), big)
    assert read_text_bounded(big, max_bytes=4096).startswith("a: 1")


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 10_000, 1_000_000])
def test_deep_nesting_is_refused_not_a_recursion_error(depth):
    nest = "[" * depth + "]" * depth
    with pytest.raises(InputError, match="nested more than 64 deep"):
        parse_json('{"a": ' + nest + "}", "x.json")
    with pytest.raises(InputError, match="nested more than 64 deep"):
        parse_yaml("a: " + nest, "x.yaml")


def test_block_style_yaml_nesting_is_refused_too():
    text = "".join("  " * i + "k:\n" for i in range(2000)) + "  " * 2000 + "v\n"
    with pytest.raises(InputError, match="nested more than 64 deep, line 64"):
        parse_yaml(text, "x.yaml")


def test_nesting_up_to_the_limit_is_read_and_brackets_in_strings_do_not_count():
    assert not json_nested_too_deep("[" * MAX_NESTING + "]" * MAX_NESTING + "[]" * 500)
    assert json_nested_too_deep("[" * (MAX_NESTING + 1) + "]" * (MAX_NESTING + 1))
    assert parse_json('{"a": ' + "[" * (MAX_NESTING - 1) + "]" * (MAX_NESTING - 1) + "}", "x.json")
    assert parse_json(json.dumps({"s": "[" * 5000}), "x.json") == {"s": "[" * 5000}


def test_a_repeated_key_is_named_in_json_and_yaml():
    with pytest.raises(InputError, match=r"x\.json: num_hidden_layers: given twice"):
        parse_json('{"num_hidden_layers": 32, "a": {"b": 1}, "num_hidden_layers": 4}', "x.json")
    with pytest.raises(InputError, match="inner: given twice"):
        parse_json('{"a": {"inner": 1, "inner": 2}}', "x.json")
    with pytest.raises(InputError, match="key 'a' given twice, line 2"):
        parse_yaml("a: 1\na: 2\n", "x.yaml")


def test_a_jsonl_trace_with_a_repeated_key_on_a_later_line_is_refused(tmp_path):
    from sim.inputs.workload import load_trace

    path = tmp_path / "t.jsonl"
    row = '{"arrival_s": 0, "prompt_tokens": 10, "output_tokens": 5}\n'
    path.write_text(row + '{"arrival_s": 1, "prompt_tokens": 10, "prompt_tokens": 99, "output_tokens": 5}\n')
    with pytest.raises(InputError, match=r"t\.jsonl:2: prompt_tokens: given twice"):
        load_trace(path)


def _vllm_bench(tmp_path, **changes):
    """The fixture's detailed bench JSON with `field=(index, value)` entries changed."""
    data = json.loads((Path(__file__).parent / "fixtures" / "measured" / "vllm_bench_detailed.json").read_text())
    for key, (index, value) in changes.items():
        data[key][index] = value
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("first, last", [(0.0, 1e308), (-1e308, 1e308), (0.0, 2e10)])
def test_a_huge_span_in_a_per_request_file_is_one_line_not_a_numpy_warning(tmp_path, first, last):
    data = json.loads(_vllm_bench(tmp_path).read_text())
    data["start_times"][0], data["start_times"][-1] = first, last
    path = tmp_path / "span.json"
    path.write_text(json.dumps(data))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning would fail here
        with pytest.raises(InputError, match="start_times: span .* above the limit of 1e[+]10 s"):
            load_measured(path)


@pytest.mark.parametrize("field, value", [("ttfts", 1e308), ("latencies", 1e300), ("input_lens", 1e300)])
def test_per_request_times_and_lengths_are_bounded_where_read(tmp_path, field, value):
    with pytest.raises(InputError, match=f"{field}: must be at most"):
        load_measured(_vllm_bench(tmp_path, **{field: (0, value)}))


def test_a_tiny_series_window_is_refused_where_read():
    with pytest.raises(Exception, match="window_s"):
        SeriesRate.model_validate({"kind": "series", "window_s": 1e-300, "rates_rps": [1.0]})
    rate = SeriesRate.model_validate({"kind": "series", "window_s": 1e-3, "rates_rps": [1.0, 2.0]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from sim.fleet.profile import RateProfile, Rates

        Rates(RateProfile(base=rate)).rate_rps(np.array([0.0, 86_400.0 * 7]))


def _error(read, path) -> str:
    try:
        read(path)
    except InputError as exc:
        return exc.line()
    return "accepted"


def test_a_jsonl_trace_line_is_bounded_before_it_is_held_whole(tmp_path):
    from sim.inputs.workload import load_trace
    from sim.inputs.workload.jsonl_formats import MAX_LINE_BYTES

    path = tmp_path / "t.jsonl"
    row = '{"arrival_s": 0, "prompt_tokens": 10, "output_tokens": 5}\n'
    path.write_text(row + '{"arrival_s": 1, "pad": "' + "x" * MAX_LINE_BYTES + '"}\n')
    with pytest.raises(InputError, match=r"t\.jsonl:2: line longer than 16 MiB"):
        load_trace(path)
