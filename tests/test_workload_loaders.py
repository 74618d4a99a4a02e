"""Loaders: bundled traces reproduce known statistics; every format parses; bad input is
one InputError naming the file and the field."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.errors import InputError
from sim.inputs.workload import load_workload, prefix_hit_rate_infinite, prefix_hit_tokens_infinite
from sim.inputs.workload.canonical import write_canonical_jsonl
from sim.inputs.workload.columns import ragged_offsets
from sim.inputs.workload.trace import Trace


def test_azure_conv_reproduces_known_statistics():
    trace = load_workload("azure_conv_2023")
    assert len(trace) == 19_366
    assert round(trace.prompt_tokens.mean()) == 1155
    assert round(trace.output_tokens.mean()) == 211
    # 18:15:50.9951690 - 18:15:46.6805900 (7 fractional digits, seconds since the first row)
    assert trace.arrival_s[0] == 0.0
    assert trace.arrival_s[1] == pytest.approx(4.314579, abs=1e-9)


def test_splitwise_is_the_retimed_azure_trace():
    azure, splitwise = load_workload("azure_conv_2023"), load_workload("splitwise_conv")
    np.testing.assert_array_equal(azure.prompt_tokens, splitwise.prompt_tokens)
    np.testing.assert_array_equal(azure.output_tokens, splitwise.output_tokens)


def test_mooncake_conversation_statistics_and_hit_rate():
    trace = load_workload("mooncake_conversation")
    assert len(trace) == 12_031
    assert trace.hash_block_tokens == 512
    assert trace.arrival_s[-1] == pytest.approx(3536.999)  # timestamps are ms
    assert prefix_hit_rate_infinite(trace) == pytest.approx(0.374, abs=0.001)


def test_mooncake_synthetic_hit_rate():
    assert prefix_hit_rate_infinite(load_workload("mooncake_synthetic")) == pytest.approx(
        0.651, abs=0.001
    )


def test_lengths_only_trace_gets_seeded_poisson_arrivals():
    first = load_workload("sharegpt", seed=3, lengths_rate_qps=10.0)
    again = load_workload("sharegpt", seed=3, lengths_rate_qps=10.0)
    np.testing.assert_array_equal(first.arrival_s, again.arrival_s)
    assert len(first) == 30_731
    assert len(first) / first.arrival_s[-1] == pytest.approx(10.0, rel=0.03)


def test_unknown_bundled_name_is_an_input_error():
    with pytest.raises(InputError, match="no such file or bundled workload"):
        load_workload("no_such_trace")


def _write(tmp_path, name, text, mode="w"):
    path = tmp_path / name
    if mode == "wb":
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def test_qwen_format_is_sniffed_with_16_token_blocks(tmp_path):
    lines = [
        (
            '{"chat_id": 1, "parent_chat_id": -1, "timestamp": 0.5, "input_length": 40, '
            '"output_length": 5, "type": "text", "turn": 1, "hash_ids": [7, 8, 9]}'
        ),
        (
            '{"chat_id": 2, "parent_chat_id": 1, "timestamp": 2.5, "input_length": 50, '
            '"output_length": 6, "type": "text", "turn": 2, "hash_ids": [7, 8, 10, 11]}'
        ),
    ]
    trace = load_workload(_write(tmp_path, "q.jsonl", "\n".join(lines) + "\n"))
    assert trace.hash_block_tokens == 16
    np.testing.assert_array_equal(trace.arrival_s, [0.0, 2.0])
    np.testing.assert_array_equal(trace.extra["turn"], [1, 2])
    np.testing.assert_array_equal(prefix_hit_tokens_infinite(trace), [0, 32])


def test_burstgpt_drops_failed_rows_unless_kept(tmp_path):
    text = (
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "5,ChatGPT,100,20,120,Conversation log\n"
        "6,ChatGPT,80,0,80,Conversation log\n"
        "9,GPT-4,50,10,60,API log\n"
    )
    path = _write(tmp_path, "burst.csv", text)
    assert len(load_workload(path)) == 2
    kept = load_workload(path, keep_failed=True)
    np.testing.assert_array_equal(kept.extra["failed"], [False, True, False])
    np.testing.assert_array_equal(kept.output_tokens, [20, 1, 10])
    np.testing.assert_array_equal(kept.arrival_s, [0.0, 1.0, 4.0])


def test_generic_csv_with_column_mapping_and_ms(tmp_path):
    path = _write(tmp_path, "g.csv", "ts,in,out\n1000,10,2\n3500,20,4\n")
    trace = load_workload(
        path,
        "generic",
        columns={"arrival_s": "ts", "prompt_tokens": "in", "output_tokens": "out"},
        time_unit="ms",
    )
    np.testing.assert_array_equal(trace.arrival_s, [0.0, 2.5])
    with pytest.raises(InputError, match=r"g\.csv: arrival_s: missing column"):
        load_workload(path, "generic")


def test_canonical_jsonl_round_trip(tmp_path):
    trace = Trace(
        arrival_s=np.array([0.0, 0.125, 1 / 3]),
        prompt_tokens=np.array([16, 40, 33]),
        output_tokens=np.array([3, 1, 7]),
        n_samples=np.array([1, 4, 2]),
        hash_ids_flat=np.array([5, 6, 5, 9, 2**62]),
        hash_offsets=np.array([0, 1, 3, 5]),
        hash_block_tokens=16,
        extra={"session_id": np.array([0, 0, 1]), "turn": np.array([1, 2, 1])},
    )
    path = tmp_path / "c.jsonl"
    write_canonical_jsonl(trace, path)
    back = load_workload(path)
    for name in (
        "arrival_s",
        "prompt_tokens",
        "output_tokens",
        "n_samples",
        "hash_ids_flat",
        "hash_offsets",
    ):
        np.testing.assert_array_equal(getattr(back, name), getattr(trace, name))
    assert back.hash_block_tokens == 16
    np.testing.assert_array_equal(back.extra["turn"], [1, 2, 1])


NO_OUTPUT_KEY = (
    '{"timestamp": 0, "input_length": 5, "output_length": 2}\n{"timestamp": 1, "input_length": 5}\n'
)


@pytest.mark.parametrize(
    ("name", "content", "field"),
    [
        ("missing.csv", "arrived_at,num_prefill_tokens\n0,5\n", "num_decode_tokens"),
        (
            "negative.csv",
            "arrived_at,num_prefill_tokens,num_decode_tokens\n0,5,3\n1,-4,2\n",
            "num_prefill_tokens",
        ),
        (
            "text.csv",
            "arrived_at,num_prefill_tokens,num_decode_tokens\n0,5,3\n1,5,many\n",
            "num_decode_tokens",
        ),
        (
            "frac.csv",
            "arrived_at,num_prefill_tokens,num_decode_tokens\n0,5.5,3\n",
            "num_prefill_tokens",
        ),
        (
            "hole.csv",
            "arrived_at,num_prefill_tokens,num_decode_tokens\n0,,3\n",
            "num_prefill_tokens",
        ),
        (
            "neg.jsonl",
            '{"timestamp": 0, "input_length": -3, "output_length": 2, "hash_ids": []}\n',
            "input_length",
        ),
        (
            "str.jsonl",
            '{"timestamp": 0, "input_length": "12", "output_length": 2, "hash_ids": []}\n',
            "input_length",
        ),
        ("nokey.jsonl", NO_OUTPUT_KEY, None),
        (
            "ids.jsonl",
            '{"timestamp": 0, "input_length": 5, "output_length": 2, "hash_ids": ["a"]}\n',
            "hash_ids",
        ),
        ("badtime.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,4,5\n", "TIMESTAMP"),
    ],
)
def test_malformed_input_names_file_and_field(tmp_path, name, content, field):
    path = _write(tmp_path, name, content)
    with pytest.raises(InputError) as caught:
        load_workload(path)
    assert name in caught.value.line()
    if field:
        assert caught.value.field == field


def test_missing_key_in_jsonl_names_the_line(tmp_path):
    path = _write(tmp_path, "nokey.jsonl", NO_OUTPUT_KEY)
    with pytest.raises(InputError, match="output_length: missing at line 2"):
        load_workload(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty file"),
        (b"   \n\n", "empty file"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary"),
        (b"\xff\xfe\xfa garbage", "not UTF-8"),
        (b"arrived_at,num_prefill_tokens,num_decode_tokens\n", "no requests"),
        (b"foo,bar\n1,2\n", "matches no known format"),
        (b"{not json\n", "not valid JSON"),
    ],
)
def test_empty_binary_or_unknown_files(tmp_path, content, message):
    path = _write(tmp_path, "bad.csv", content, mode="wb")
    with pytest.raises(InputError, match=message) as caught:
        load_workload(path)
    assert "bad.csv" in caught.value.line()


def test_unsorted_timestamps_are_sorted_with_a_warning_or_refused_under_strict(tmp_path):
    path = _write(
        tmp_path,
        "u.csv",
        "arrived_at,num_prefill_tokens,num_decode_tokens\n2,20,2\n1,10,1\n3,30,3\n",
    )
    with pytest.warns(UserWarning, match="not sorted"):
        trace = load_workload(path)
    np.testing.assert_array_equal(trace.arrival_s, [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(trace.prompt_tokens, [10, 20, 30])
    with pytest.raises(InputError, match=r"u\.csv: arrived_at: must be non-decreasing"):
        load_workload(path, strict=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_workload("splitwise_code")  # a sorted trace warns nothing


def _brute_force_hit_tokens(id_lists, prompts, block_tokens):
    seen, hits = set(), []
    for ids, prompt in zip(id_lists, prompts):
        run = 0
        while run < len(ids) and ids[run] in seen:
            run += 1
        hits.append(min(run * block_tokens, prompt))
        seen.update(ids)
    return hits


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 6), max_size=6), min_size=1, max_size=12), st.integers(1, 8)
)
def test_prefix_hits_match_brute_force(id_lists, block_tokens):
    prompts = [max(1, len(ids) * block_tokens - 1) for ids in id_lists]
    lengths = np.array([len(ids) for ids in id_lists])
    trace = Trace(
        arrival_s=np.arange(len(id_lists), dtype=float),
        prompt_tokens=np.array(prompts),
        output_tokens=np.ones(len(id_lists)),
        hash_ids_flat=np.array([i for ids in id_lists for i in ids], dtype=np.int64),
        hash_offsets=ragged_offsets(lengths),
        hash_block_tokens=block_tokens,
    )
    expected = _brute_force_hit_tokens(id_lists, prompts, block_tokens)
    np.testing.assert_array_equal(prefix_hit_tokens_infinite(trace), expected)


def test_small_chunks_give_the_same_trace(monkeypatch):
    """The streaming paths (many JSONL chunks, many CSV blocks) join to the same columns."""
    from sim.inputs.workload import csv_formats, jsonl_formats

    whole_jsonl, whole_csv = (
        load_workload("mooncake_conversation"),
        load_workload("azure_conv_2023"),
    )
    monkeypatch.setattr(jsonl_formats, "CHUNK_ROWS", 1000)
    monkeypatch.setattr(csv_formats, "_BLOCK_BYTES", 1 << 14)
    chunked_jsonl, chunked_csv = (
        load_workload("mooncake_conversation"),
        load_workload("azure_conv_2023"),
    )
    for name in ("arrival_s", "prompt_tokens", "output_tokens", "hash_ids_flat", "hash_offsets"):
        np.testing.assert_array_equal(getattr(chunked_jsonl, name), getattr(whole_jsonl, name))
    for name in ("arrival_s", "prompt_tokens", "output_tokens"):
        np.testing.assert_array_equal(getattr(chunked_csv, name), getattr(whole_csv, name))
