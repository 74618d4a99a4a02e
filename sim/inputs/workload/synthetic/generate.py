"""Synthetic workloads from a `Synthetic` spec: sessions (one request, or a conversation),
their arrival times, lengths, shared prefixes and hash ids.

The arrival process times *sessions*: for single-turn workloads a session is a request;
for multi-turn ones, `rate_qps` is the rate of new conversations. Each part draws from
its own child of `SeedSequence(seed)`, so changing the lengths leaves arrivals alone.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sim.errors import InputError
from sim.inputs.budget import MAX_HASH_IDS, MAX_PREFIX_BLOCKS, MAX_ROWS, MAX_SEQUENCES, require
from sim.inputs.workload.bench import closed_loop
from sim.inputs.workload.columns import ragged_offsets
from sim.inputs.workload.spec_models import FixedDist, Synthetic
from sim.inputs.workload.synthetic.adapters import adapter_columns, adapter_rng
from sim.inputs.workload.synthetic.arrivals import arrival_times_s
from sim.inputs.workload.synthetic.lengths import sample_dist, sample_length_pairs
from sim.inputs.workload.synthetic.prefix_ids import build_shared_prefixes, request_hash_ids
from sim.inputs.workload.trace import ClosedLoop, Trace
from sim.schema import MAX_REQUESTS, MAX_TOKENS

_NO_TURNS = FixedDist(kind="fixed", value=1)


def zipf_choice(rng: np.random.Generator, n_templates: int, zipf_s: float, size: int) -> np.ndarray:
    """Template indices 0..n-1; template k (1-based) has weight k^-zipf_s."""
    weights = np.arange(1, n_templates + 1, dtype=np.float64) ** -zipf_s
    return rng.choice(n_templates, size=size, p=weights / weights.sum())


def _sessions(spec: Synthetic, rng_turns, rng_arrivals) -> tuple[np.ndarray, np.ndarray]:
    """(turns per session, session start times); closed loops start everything at 0."""
    turns_dist = spec.prefix.multi_turn.turns if spec.prefix.multi_turn else _NO_TURNS
    arrival = spec.arrival
    if spec.n_requests is None:
        starts = arrival_times_s(
            rng_arrivals,
            arrival.kind,
            arrival.rate_qps,
            cv=getattr(arrival, "cv", 1.0),
            duration_s=spec.duration_s,
        )
        return sample_dist(turns_dist, rng_turns, len(starts)), starts
    turns = np.empty(0, dtype=np.int64)
    while turns.sum() < spec.n_requests:
        turns = np.concatenate([turns, sample_dist(turns_dist, rng_turns, spec.n_requests)])
    turns = turns[: int(np.searchsorted(np.cumsum(turns), spec.n_requests)) + 1]
    if arrival.kind == "closed_loop":
        return turns, np.zeros(len(turns))
    starts = arrival_times_s(
        rng_arrivals, arrival.kind, arrival.rate_qps, cv=getattr(arrival, "cv", 1.0), n=len(turns)
    )
    return turns, starts


def _segment_exclusive_cumsum(values: np.ndarray, first_row: np.ndarray, session_of) -> np.ndarray:
    """Per row: the sum of `values` over earlier rows of the same session."""
    running = np.cumsum(values) - values
    return running - running[first_row][session_of]


def _shared_prefixes(spec: Synthetic, rng: np.random.Generator, n_sessions: int, where: str):
    """(SharedPrefixes, prefix index per session) for the system prompts / few-shot spec; the
    prefixes' sizes are checked against sim.inputs.budget before they are built."""
    system, few_shot = spec.prefix.system_prompts, spec.prefix.few_shot
    system_tokens, system_of = np.zeros(1, dtype=np.int64), np.zeros(n_sessions, dtype=np.int64)
    if system is not None:
        system_tokens = sample_dist(system.tokens, rng, system.n_templates)
        system_of = zipf_choice(rng, system.n_templates, system.zipf_s, n_sessions)
    instruction, example_tokens = 0, np.zeros(1, dtype=np.int64)
    few_shot_of = np.zeros(n_sessions, dtype=np.int64)
    if few_shot is not None:
        instruction = few_shot.instruction_tokens
        require(few_shot.n_templates * few_shot.n_shots, MAX_ROWS, "shot lengths",
                "synthetic.prefix.few_shot.n_templates x n_shots", where)
        shots = sample_dist(few_shot.shot_tokens, rng, few_shot.n_templates * few_shot.n_shots)
        example_tokens = shots.reshape(few_shot.n_templates, few_shot.n_shots).sum(axis=1)
        few_shot_of = zipf_choice(rng, few_shot.n_templates, few_shot.zipf_s, n_sessions)
    # the distinct (system, few-shot) pairs in lexicographic order: one int key per pair
    n_few_shot = int(few_shot_of.max()) + 1 if n_sessions else 1
    keys, prefix_of = np.unique(system_of * n_few_shot + few_shot_of, return_inverse=True)
    pairs = np.stack(np.divmod(keys, n_few_shot), axis=1)
    pair_tokens = system_tokens[pairs[:, 0]] + instruction + example_tokens[pairs[:, 1]]
    if len(pair_tokens) and pair_tokens.max() > MAX_TOKENS:
        raise InputError(where, "synthetic.prefix", f"a shared prefix (system prompt + few-shot instruction + shots) "
                                                    f"has {int(pair_tokens.max()):,} tokens; at most {MAX_TOKENS:,}")
    require(float((pair_tokens // spec.hash_block_tokens).sum()), MAX_PREFIX_BLOCKS, "shared prefix blocks",
            "synthetic.prefix (templates in use x their tokens / hash_block_tokens)", where)
    prefixes = build_shared_prefixes(
        system_tokens, instruction, example_tokens, pairs, spec.hash_block_tokens
    )
    return prefixes, prefix_of.reshape(-1)


def _check_prompts(prompts: np.ndarray, block_tokens: int, where: str) -> None:
    """Prompts as assembled (shared prefix + conversation history + message) within MAX_TOKENS,
    and their hash ids (one per block) within sim.inputs.budget."""
    if len(prompts) and prompts.max() > MAX_TOKENS:
        row = int(np.argmax(prompts))
        raise InputError(where, "synthetic", f"request {row} has a {int(prompts[row]):,}-token prompt after its shared "
                                             f"prefix and history are put in front; at most {MAX_TOKENS:,}")
    require(float(np.ceil(prompts / block_tokens).sum()), MAX_HASH_IDS, "prefix hash ids",
            "requests x prompt tokens / hash_block_tokens", where)


def generate_synthetic(
    spec: Synthetic, seed: int, base_dir: Path | None = None, where: str = "synthetic"
) -> Trace | ClosedLoop:
    """The requests `spec` describes, sorted by arrival; a ClosedLoop for closed-loop arrivals.
    Same spec and seed -> identical output. Sizes that multiply (conversation turns, prompts
    after their prefix and history, hash ids, parallel samples) are checked against sim.inputs.budget
    before the arrays they size are made: InputError naming `where` (the spec file)."""
    rngs = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(6)]
    turns, starts = _sessions(spec, rngs[0], rngs[1])
    n_sessions, n_rows = len(turns), int(turns.sum())
    require(n_rows, MAX_REQUESTS, "requests", "synthetic sessions x prefix.multi_turn.turns", where)
    session_of = np.repeat(np.arange(n_sessions), turns)
    first_row = ragged_offsets(turns)[:-1]
    turn = np.arange(n_rows) - first_row[session_of]  # 0-based
    think_mean_s = spec.prefix.multi_turn.think_time_s if spec.prefix.multi_turn else 0.0
    gaps_s = np.where(turn > 0, rngs[2].exponential(1.0, size=n_rows) * think_mean_s, 0.0)
    arrival_s = starts[session_of] + np.cumsum(gaps_s) - np.cumsum(gaps_s)[first_row][session_of]
    messages, outputs = sample_length_pairs(spec.lengths, rngs[3], n_rows, base_dir)
    prefixes, prefix_of_session = _shared_prefixes(spec, rngs[4], n_sessions, where)
    prefix_of = prefix_of_session[session_of]
    history = _segment_exclusive_cumsum(messages + outputs, first_row, session_of)
    prompts = prefixes.tokens[prefix_of] + history + messages
    _check_prompts(prompts, spec.hash_block_tokens, where)
    n_samples = sample_dist(spec.n_samples, rngs[5], n_rows) if spec.n_samples else None
    if n_samples is not None:
        require(float(n_samples.sum()), MAX_SEQUENCES, "sequences", "requests x synthetic.n_samples", where)
    flat, offsets = request_hash_ids(
        prefixes, prefix_of, session_of, prompts, spec.hash_block_tokens
    )
    extra = {"session_id": session_of, "turn": turn + 1} if spec.prefix.multi_turn else {}
    if spec.adapters is not None:  # its own stream: the other draws stay as they are without adapters
        extra.update(adapter_columns(spec.adapters, session_of, adapter_rng(seed)))
    trace = Trace(
        arrival_s=arrival_s,
        prompt_tokens=prompts,
        output_tokens=outputs,
        n_samples=n_samples,
        hash_ids_flat=flat,
        hash_offsets=offsets,
        hash_block_tokens=spec.hash_block_tokens,
        source="synthetic",
        extra=extra,
    )
    order = np.argsort(arrival_s, kind="stable")
    if spec.n_requests is not None:
        order = order[: spec.n_requests]
    else:
        order = order[arrival_s[order] < spec.duration_s]
    trace = trace.take(order)
    if spec.arrival.kind == "closed_loop":
        return closed_loop(trace, spec.arrival, seed)
    return trace
