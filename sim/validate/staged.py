"""The `shared_prefix_stages` validation workload: constant-rate load stages over shared-prefix
prompts, as the inference-perf load generator runs them (`load.type: constant`,
`data.type: shared_prefix`), and the per-stage metrics read from one simulation.

Workload (a case's `workload_args`, space-separated key=value):
- `rates=5;10 durations=600;600`: stage k sends `rates[k]` requests per second, evenly spaced
  (constant interval, not Poisson), for `durations[k]` seconds, one stage after the other.
- `groups=10 per_group=10`: `groups x per_group` distinct prompts; the prompts of a group share
  a system prompt of `system=100` tokens, each prompt then has its own question. Requests cycle
  through the distinct prompts in a seeded shuffled order (inference-perf pre-generates them and
  sends `data_index % n_prompts`), so a prompt repeats every `groups x per_group` requests: with
  prefix caching its blocks are reused, not only the system prompt's.
- `prompt_quantiles=min:580;p50:591;...;max:604`: the measured prompt-length distribution
  (tokens, after the server's tokenisation); each distinct prompt draws its length from it.
- `output=247`: every request generates exactly this many tokens (`ignore_eos`).
- `stage=1`: the stage whose requests (by arrival) a row's metric describes.
- `measured=overloaded`: the measured server did not keep up (client timeouts): its latencies
  describe only the requests that finished, so the row is not compared; validation reports
  whether the simulated server also failed to keep up.

One simulation serves every stage and metric of a run: `simulate_stages` is cached on the
config and the workload without `stage`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from sim.errors import InputError
from sim.inputs.workload.trace import Trace

PREFIX_BLOCK_TOKENS = 16  # granularity of the prefix hash ids (vLLM's default block size)
SHUFFLE_SEED = 0
MAX_STAGE_REQUESTS = 200_000  # requests of one staged run (rate x duration, summed)
KEPT_UP_QUEUE_S = 1.0  # a stage kept up when its last quarter waited less than this on average


@dataclass(frozen=True)
class StagedWorkload:
    rates_rps: tuple[float, ...]
    durations_s: tuple[float, ...]
    n_groups: int
    per_group: int
    system_tokens: int
    prompt_quantiles: tuple[tuple[float, float], ...]  # (probability, tokens), increasing
    output_tokens: int

    @property
    def n_requests(self) -> int:
        return sum(int(round(r * d)) for r, d in zip(self.rates_rps, self.durations_s))


def _floats(where: str, key: str, text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(x) for x in text.split(";"))
    except ValueError:
        raise InputError(where, f"workload_args.{key}", f"numbers separated by ';' (got {text!r})") from None
    if not values or not all(np.isfinite(v) and v > 0 for v in values):
        raise InputError(where, f"workload_args.{key}", f"finite numbers > 0 separated by ';' (got {text!r})")
    return values


def _positive_int(where: str, args: dict, key: str) -> int:
    text = args.get(key)
    if text is None:
        raise InputError(where, f"workload_args.{key}", "required for shared_prefix_stages")
    if not text.isdigit() or int(text) < 1:
        raise InputError(where, f"workload_args.{key}", f"a whole number >= 1 (got {text!r})")
    return int(text)


def _quantiles(where: str, text: str) -> tuple[tuple[float, float], ...]:
    points = []
    for item in text.split(";"):
        name, sep, value = item.partition(":")
        if not sep:
            raise InputError(where, "workload_args.prompt_quantiles", f"items are name:tokens (got {item!r})")
        prob = {"min": 0.0, "max": 1.0, "median": 0.5}.get(name)
        try:
            prob = prob if prob is not None else float(name.removeprefix("p")) / 100.0
            tokens = float(value)
        except ValueError:
            raise InputError(where, "workload_args.prompt_quantiles", f"name pN, min, median or max with a "
                                                                      f"token count (got {item!r})") from None
        if not (0.0 <= prob <= 1.0) or not (np.isfinite(tokens) and tokens >= 1):
            raise InputError(where, "workload_args.prompt_quantiles", f"probability in [0, 1], tokens >= 1 "
                                                                      f"(got {item!r})")
        points.append((prob, tokens))
    points.sort()
    probs = [p for p, _ in points]
    if len(points) < 2 or probs[0] != 0.0 or probs[-1] != 1.0 or len(set(probs)) != len(probs):
        raise InputError(where, "workload_args.prompt_quantiles", "distinct quantiles including min and max")
    if any(b[1] < a[1] for a, b in zip(points, points[1:])):
        raise InputError(where, "workload_args.prompt_quantiles", "token counts non-decreasing in probability")
    return tuple(points)


def parse_staged(where: str, args: dict) -> tuple[StagedWorkload, int]:
    """(the workload, the stage a row reads) from a case's `workload_args`; InputError otherwise."""
    known = {"rates", "durations", "groups", "per_group", "system", "prompt_quantiles", "output", "stage", "measured"}
    unknown = sorted(set(args) - known)
    if unknown:
        raise InputError(where, f"workload_args.{unknown[0]}", f"unknown key; allowed: {', '.join(sorted(known))}")
    for key in ("rates", "durations", "prompt_quantiles"):
        if key not in args:
            raise InputError(where, f"workload_args.{key}", "required for shared_prefix_stages")
    rates, durations = _floats(where, "rates", args["rates"]), _floats(where, "durations", args["durations"])
    if len(rates) != len(durations):
        raise InputError(where, "workload_args.durations", "one duration per rate")
    workload = StagedWorkload(rates, durations, _positive_int(where, args, "groups"),
                              _positive_int(where, args, "per_group"), _positive_int(where, args, "system"),
                              _quantiles(where, args["prompt_quantiles"]), _positive_int(where, args, "output"))
    stage = int(args.get("stage", "0")) if str(args.get("stage", "0")).isdigit() else -1
    if not 0 <= stage < len(rates):
        raise InputError(where, "workload_args.stage", f"a stage index 0..{len(rates) - 1}")
    if workload.n_requests > MAX_STAGE_REQUESTS:
        raise InputError(where, "workload_args.rates", f"rates x durations give {workload.n_requests} requests; "
                                                       f"at most {MAX_STAGE_REQUESTS}")
    if args.get("measured", "ok") not in ("ok", "overloaded"):
        raise InputError(where, "workload_args.measured", "ok or overloaded")
    if workload.system_tokens >= workload.prompt_quantiles[0][1]:
        raise InputError(where, "workload_args.system", "the system prompt must be shorter than every prompt")
    return workload, stage


def staged_trace(workload: StagedWorkload) -> tuple[Trace, np.ndarray]:
    """(the trace, each request's stage index). Prefix hash ids per 16-token block: a group's
    system-prompt blocks are shared by its prompts; a prompt's other blocks are its own (and
    shared by its repeats). Lengths and order come from a generator seeded with SHUFFLE_SEED."""
    rng = np.random.default_rng(SHUFFLE_SEED)
    n_prompts = workload.n_groups * workload.per_group
    probs = np.array([p for p, _ in workload.prompt_quantiles])
    tokens = np.array([t for _, t in workload.prompt_quantiles])
    lengths = np.round(np.interp(rng.random(n_prompts), probs, tokens)).astype(np.int64)
    order = rng.permutation(n_prompts)
    arrivals, stages, start_s = [], [], 0.0
    for k, (rate, duration) in enumerate(zip(workload.rates_rps, workload.durations_s)):
        n = int(round(rate * duration))
        arrivals.append(start_s + np.arange(n) / rate)
        stages.append(np.full(n, k))
        start_s += duration
    arrival_s, stage = np.concatenate(arrivals), np.concatenate(stages)
    prompt_id = order[np.arange(arrival_s.shape[0]) % n_prompts]
    prompt = lengths[prompt_id]
    flat, offsets = _prefix_ids(prompt_id, prompt, workload)
    output = np.full(arrival_s.shape[0], workload.output_tokens, dtype=np.int64)
    trace = Trace(arrival_s, prompt, output, hash_ids_flat=flat, hash_offsets=offsets,
                  hash_block_tokens=PREFIX_BLOCK_TOKENS, source="shared_prefix_stages")
    return trace, stage


def _prefix_ids(prompt_id: np.ndarray, prompt: np.ndarray, workload: StagedWorkload):
    """Ragged hash ids: block j of a prompt of group g is `g * S + j` for the system prompt's
    full blocks, else a prompt-own id; ids never collide across prompts or groups."""
    n_blocks = -(-prompt // PREFIX_BLOCK_TOKENS)
    system_blocks = workload.system_tokens // PREFIX_BLOCK_TOKENS
    width = int(n_blocks.max())
    offsets = np.zeros(prompt.shape[0] + 1, dtype=np.int64)
    np.cumsum(n_blocks, out=offsets[1:])
    row = np.repeat(np.arange(prompt.shape[0]), n_blocks)
    j = np.arange(offsets[-1]) - offsets[row]
    pid = prompt_id[row]
    group = pid // workload.per_group
    shared = group * width + j
    own = (workload.n_groups + pid) * width + j
    return np.where(j < system_blocks, shared, own).astype(np.int64), offsets


@dataclass(frozen=True)
class StageStats:
    mean_ttft_ms: float
    mean_e2e_latency_ms: float
    mean_tpot_ms: float
    p99_ttft_ms: float
    kept_up: bool
    n_rejected: int


@lru_cache(maxsize=16)
def _simulate(config_json: str, workload: StagedWorkload, overhead) -> tuple[StageStats, ...]:
    from sim.inputs.config import EngineConfig
    from sim.run.simulate import simulate

    cfg = EngineConfig.model_validate(json.loads(config_json))
    trace, stage = staged_trace(workload)
    table = simulate(cfg, trace, overhead=overhead).table
    n = trace.arrival_s.shape[0]
    ttft = table.first_token_s[:n] - table.arrival_s[:n]
    e2e = table.finish_s[:n] - table.arrival_s[:n]
    queue = table.scheduled_s[:n] - table.arrival_s[:n]
    out = []
    for k in range(len(workload.rates_rps)):
        rows = np.flatnonzero(stage == k)
        done = rows[np.isfinite(e2e[rows])]
        last_quarter = done[done >= rows[0] + 3 * len(rows) // 4]
        mean_ttft, mean_e2e = float(np.mean(ttft[done])), float(np.mean(e2e[done]))
        out.append(StageStats(mean_ttft * 1e3, mean_e2e * 1e3, (mean_e2e - mean_ttft) / (workload.output_tokens - 1)
                              * 1e3, float(np.percentile(ttft[done], 99)) * 1e3,
                              bool(last_quarter.size and np.mean(queue[last_quarter]) < KEPT_UP_QUEUE_S),
                              int(rows.shape[0] - done.shape[0])))
    return tuple(out)


def simulate_stages(cfg, workload: StagedWorkload, overhead=None) -> tuple[StageStats, ...]:
    """Per-stage statistics of one simulation of `workload` under `cfg` (cached); `overhead`
    (sim.inputs.engines.EngineOverhead) replaces the preset's engine terms (fitting)."""
    return _simulate(cfg.model_dump_json(), workload, overhead)
