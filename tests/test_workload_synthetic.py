"""Synthetic generators: arrival statistics, the multi-turn prefix hit rate against its
analytic value, honest hash ids, determinism."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from sim.inputs.workload import prefix_hit_rate_infinite
from sim.inputs.workload.spec_models import Synthetic
from sim.inputs.workload.synthetic.arrivals import arrival_times_s
from sim.inputs.workload.synthetic.generate import generate_synthetic
from sim.inputs.workload.trace import ClosedLoop

B = 16


def _fixed(value):
    return {"kind": "fixed", "value": value}


def _spec(**overrides) -> Synthetic:
    document = {
        "arrival": {"kind": "poisson", "rate_qps": 1.0},
        "lengths": {"prompt": _fixed(50), "output": _fixed(30)},
        "n_requests": 1000,
        "hash_block_tokens": B,
    }
    document.update(overrides)
    return Synthetic.model_validate(document)


def test_poisson_count_within_three_sigma_and_exponential_gaps():
    rate_qps, duration_s = 5.0, 2000.0
    for seed in range(5):
        times = arrival_times_s(
            np.random.default_rng(seed), "poisson", rate_qps, duration_s=duration_s
        )
        expected = rate_qps * duration_s
        assert abs(len(times) - expected) < 3 * np.sqrt(expected)
        assert times.min() >= 0 and times.max() < duration_s and (np.diff(times) >= 0).all()
        gaps = np.diff(times)
        assert stats.kstest(gaps, "expon", args=(0, 1 / rate_qps)).pvalue > 0.001
    counted = arrival_times_s(np.random.default_rng(9), "poisson", rate_qps, n=20_000)
    assert stats.kstest(np.diff(counted), "expon", args=(0, 1 / rate_qps)).pvalue > 0.001


def test_ks_test_would_notice_non_exponential_gaps():
    gaps = np.diff(arrival_times_s(np.random.default_rng(0), "gamma", 5.0, cv=2.0, n=10_000))
    assert stats.kstest(gaps, "expon", args=(0, 1 / 5.0)).pvalue < 1e-6


@pytest.mark.parametrize("cv", [0.5, 1.0, 3.0])
def test_gamma_arrivals_have_the_requested_cv_and_rate(cv):
    times = arrival_times_s(np.random.default_rng(1), "gamma", 8.0, cv=cv, n=200_000)
    gaps = np.diff(times)
    assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.04)
    assert 1 / gaps.mean() == pytest.approx(8.0, rel=0.03)
    windowed = arrival_times_s(np.random.default_rng(2), "gamma", 8.0, cv=cv, duration_s=1000.0)
    assert windowed.max() < 1000.0 and len(windowed) == pytest.approx(8000, rel=0.1)


def test_constant_arrivals():
    np.testing.assert_allclose(
        arrival_times_s(None, "constant", 4.0, n=5), [0, 0.25, 0.5, 0.75, 1.0]
    )
    assert len(arrival_times_s(None, "constant", 4.0, duration_s=10.0)) == 40


def test_multi_turn_hit_rate_matches_the_exact_formula():
    """C conversations of T turns, one system prompt of S tokens, messages m, replies o.
    Turn j's prompt P_j = S + j*m + (j-1)*o. Its whole blocks up to turn j-1's prompt were
    listed by turn j-1 (the partly filled last block was not: its id is fresh), so turn j
    hits B*floor(P_{j-1}/B) tokens; turn 1 hits the system prompt's whole blocks
    B*floor(S/B), except in the very first conversation."""
    n_conversations, n_turns, system, message, reply = 300, 5, 100, 50, 30
    spec = _spec(
        n_requests=n_conversations * n_turns,
        lengths={"prompt": _fixed(message), "output": _fixed(reply)},
        prefix={
            "system_prompts": {"n_templates": 1, "tokens": _fixed(system)},
            "multi_turn": {"turns": _fixed(n_turns), "think_time_s": 30.0},
        },
    )
    trace = generate_synthetic(spec, seed=4)
    prompts = [system + j * message + (j - 1) * reply for j in range(1, n_turns + 1)]
    hits = (n_conversations - 1) * B * (system // B)
    hits += n_conversations * sum(B * (prompts[j - 1] // B) for j in range(1, n_turns))
    expected = hits / (n_conversations * sum(prompts))
    assert prefix_hit_rate_infinite(trace) == pytest.approx(expected, abs=1e-12)


def test_multi_turn_hit_rate_with_random_lengths_matches_expectation():
    """Random lengths: E[B*floor(P/B)] = E[P] - (B-1)/2 when P mod B is uniform (P spreads
    over many blocks), so E[rate] = sum_j Pr(T>=j) (E[P_{j-1}] - (B-1)/2) / sum_j Pr(T>=j) E[P_j]
    with E[P_j] = j*E[m] + (j-1)*E[o] and T uniform on 1..6."""
    spec = _spec(
        n_requests=60_000,
        lengths={
            "prompt": {"kind": "uniform", "low": 20, "high": 200},
            "output": {"kind": "uniform", "low": 10, "high": 300},
        },
        prefix={
            "multi_turn": {"turns": {"kind": "uniform", "low": 1, "high": 6}, "think_time_s": 1.0}
        },
    )
    trace = generate_synthetic(spec, seed=0)
    mean_message, mean_reply, max_turns = 110.0, 155.0, 6
    survive = [(max_turns - j + 1) / max_turns for j in range(1, max_turns + 1)]  # Pr(T >= j)

    def mean_prompt(j):
        return j * mean_message + (j - 1) * mean_reply

    hits = sum(survive[j - 1] * (mean_prompt(j - 1) - (B - 1) / 2) for j in range(2, max_turns + 1))
    total = sum(survive[j - 1] * mean_prompt(j) for j in range(1, max_turns + 1))
    assert prefix_hit_rate_infinite(trace) == pytest.approx(hits / total, abs=0.005)


def test_system_prompts_share_whole_blocks_only():
    """Single turn, 8 templates of S tokens, all used among 4,000 requests: every request
    but each template's first use hits floor(S/B) blocks."""
    system, message, n_requests, n_templates = 200, 40, 4000, 8
    spec = _spec(
        n_requests=n_requests,
        lengths={"prompt": _fixed(message), "output": _fixed(10)},
        prefix={
            "system_prompts": {"n_templates": n_templates, "zipf_s": 1.0, "tokens": _fixed(system)}
        },
    )
    trace = generate_synthetic(spec, seed=2)
    expected = (n_requests - n_templates) * B * (system // B) / (n_requests * (system + message))
    assert prefix_hit_rate_infinite(trace) == pytest.approx(expected, abs=1e-12)


def test_conversation_hash_ids_are_honest():
    spec = _spec(
        n_requests=400,
        lengths={"prompt": {"kind": "uniform", "low": 1, "high": 40}, "output": _fixed(7)},
        prefix={
            "few_shot": {
                "n_templates": 2,
                "instruction_tokens": 24,
                "n_shots": 2,
                "shot_tokens": _fixed(20),
            },
            "multi_turn": {"turns": _fixed(4), "think_time_s": 5.0},
        },
    )
    trace = generate_synthetic(spec, seed=3)
    by_session: dict[int, list[int]] = {}
    for row, session in enumerate(trace.extra["session_id"].tolist()):
        by_session.setdefault(session, []).append(row)
    for rows in by_session.values():
        for earlier, later in itertools.pairwise(rows):
            ids_before, ids_after = trace.hash_ids(earlier).tolist(), trace.hash_ids(later).tolist()
            whole = int(trace.prompt_tokens[earlier]) // B
            assert ids_after[:whole] == ids_before[:whole]
            if trace.prompt_tokens[earlier] % B:
                assert ids_before[-1] not in ids_after
    for row in range(len(trace)):
        ids = trace.hash_ids(row)
        assert len(ids) == -(-int(trace.prompt_tokens[row]) // B) == len(set(ids.tolist()))


def test_determinism_samples_and_closed_loop():
    spec = _spec(
        arrival={"kind": "gamma", "rate_qps": 3.0, "cv": 2.0},
        n_samples={"kind": "uniform", "low": 1, "high": 4},
    )
    first, again, other = (generate_synthetic(spec, seed) for seed in (7, 7, 8))
    np.testing.assert_array_equal(first.arrival_s, again.arrival_s)
    np.testing.assert_array_equal(first.n_samples, again.n_samples)
    assert not np.array_equal(first.arrival_s, other.arrival_s)
    assert set(first.n_samples.tolist()) == {1, 2, 3, 4}
    closed = generate_synthetic(_spec(arrival={"kind": "closed_loop", "concurrency": 8}), 0)
    assert isinstance(closed, ClosedLoop) and closed.concurrency == 8 and len(closed.pool) == 1000


def test_duration_bounds_the_arrivals():
    trace = generate_synthetic(
        _spec(n_requests=None, duration_s=100.0, arrival={"kind": "constant", "rate_qps": 2.0}), 0
    )
    assert len(trace) == 200 and trace.arrival_s.max() < 100.0


@pytest.mark.parametrize("with_prefixes", [False, True])
def test_row_ids_follow_the_block_rules(with_prefixes):
    """`_row_ids` (array code) against its contract written as a plain loop: shared-prefix block ids,
    then session blocks `session_start + j`, then the row's own id for a partly filled last block."""
    from sim.inputs.workload.synthetic.prefix_ids import SharedPrefixes, _row_ids

    rng = np.random.default_rng(5)
    n_rows, n_prefixes, width = 300, 4, 6
    block_ids = rng.integers(0, 50, size=(n_prefixes, width))
    prefixes = SharedPrefixes(np.zeros(n_prefixes, dtype=np.int64), block_ids, 50)
    prefix_of = rng.integers(0, n_prefixes, n_rows)
    n_prefix = rng.integers(0, width + 1, n_rows) if with_prefixes else np.zeros(n_rows, dtype=np.int64)
    n_session = rng.integers(0, 5, n_rows)
    lengths = n_prefix + n_session + rng.integers(0, 2, n_rows)
    session_start = rng.integers(100, 10_000, n_rows)
    expected = []
    for r in range(n_rows):
        expected += block_ids[prefix_of[r], : n_prefix[r]].tolist()
        expected += [int(session_start[r]) + j for j in range(n_prefix[r], n_prefix[r] + n_session[r])]
        expected += [70_000 + r] if lengths[r] > n_prefix[r] + n_session[r] else []
    got = _row_ids(prefixes, prefix_of, session_start, n_prefix, n_session, lengths, 70_000)
    assert got.tolist() == expected
