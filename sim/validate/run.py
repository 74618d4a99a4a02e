"""Replay one validation case through the simulator with its engine's preset."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.errors import InputError
from sim.inputs.config import EngineConfig
from sim.inputs.workload.trace import ClosedLoop, Trace
from sim.inputs.workload.vllm_sharegpt import load_table, sample_like_vllm, table_for_model
from sim.run.simulate import simulate
from sim.run.summary import summarize
from sim.validate.cases import Case
from sim.validate.limits import DEFAULT_MAX_SIM_REQUESTS
from sim.validate.names import dtype_name, engine_for_version, engine_name, gpu_name, model_name
from sim.validate.staged import parse_staged, simulate_stages
from sim.validate.steady_decode import predict_steady_decode
from sim.yamlio import validate

SHAREGPT_REASON = ("no bundled ShareGPT first-turn length table for this model's tokenizer (bundled: Llama-3, "
                   "Mistral v1 / Mixtral; sim.inputs.workload.vllm_sharegpt)")
SHAREGPT_SEED = 0  # vLLM's benchmarks' default --seed


@dataclass(frozen=True)
class Prediction:
    case: Case
    predicted: float | None  # None: cannot express
    reason: str = ""  # why the case cannot be expressed
    n_simulated: int = 0
    engine: str = ""
    kept_up: bool | None = None  # staged runs: whether the simulated server kept up with the stage

    @property
    def error(self) -> float | None:
        """Signed relative error (predicted - measured) / measured."""
        return None if self.predicted is None else (self.predicted - self.case.value) / self.case.value


def case_config(case: Case, engine: str | None = None, hardware: str | None = None) -> EngineConfig:
    """The config of a case: its engine's preset, its model/GPU/TP/PP/dtypes, its engine_args on top;
    `hardware` (a profile name or YAML path) in place of the case's GPU's bundled profile.
    Unknown names raise InputError (bad input, exit 2)."""
    where = case.case_id
    data: dict = {
        "engine": engine or engine_for_version(engine_name(where, case.engine), case.engine_version),
        "model": model_name(where, case.model),
        "hardware": hardware or gpu_name(where, case.gpu),
        "tp": case.tp,
        **({"pp": case.pp} if case.pp > 1 else {}),
        "weight_dtype": dtype_name(where, "weight_dtype", case.weight_dtype),
    }
    if case.kv_dtype:
        data["kv_dtype"] = dtype_name(where, "kv_dtype", case.kv_dtype)
    longest = (case.input_len or 0) + (case.output_len or 0)
    if case.workload == "shared_prefix_stages":
        staged, _ = parse_staged(where, case.workload_args)
        longest = int(staged.prompt_quantiles[-1][1]) + staged.output_tokens
    if longest:
        data["max_model_len"] = max(longest + 1, 2048)
    data.update({key: value for key, value in case.engine_args.items()
                 if key not in UNMODELLED_ARGS and key not in ENGINE_LAYOUT_ARGS})
    for key, layout_of in ENGINE_LAYOUT_ARGS.items():
        if key in case.engine_args:
            data.update(layout_of(case, case.engine_args[key]))
    return validate(EngineConfig, data, f"{case.file}: case {case.case_id}" if case.file else where)


def cannot_express(case: Case) -> str | None:
    """Why a well-formed case has no faithful simulation (None when it has one)."""
    if case.workload == "sharegpt" and table_for_model(model_name(case.case_id, case.model)) is None:
        return SHAREGPT_REASON
    for key, reason in UNMODELLED_ARGS.items():
        if key in case.engine_args:
            return reason
    if case.workload_args.get("measured") == "startup_stall" and case.metric in STALL_METRICS:
        return STALL_REASON
    return None


# a measured run whose first wave sat through a one-off start-up stall (warm-up before serving):
# the metrics that average over every request or the run's length carry it; medians and TPOT do not
STALL_METRICS = ("mean_ttft_ms", "p99_ttft_ms", "mean_e2e_latency_ms", "p99_e2e_latency_ms",
                 "output_throughput_tok_s", "output_throughput_per_gpu_tok_s", "request_throughput_req_s")
STALL_REASON = ("the measured run includes a one-off start-up stall of its first wave of requests (workload_args "
                "measured=startup_stall): not serving behaviour")


# engine settings of a measured run the simulator cannot reproduce yet: the row is kept, and
# reported as `cannot express: <why>`
UNMODELLED_ARGS: dict[str, str] = {}


def _trtllm_attention_dp(case: Case, value: str) -> dict:
    """TensorRT-LLM `enable_attention_dp: true` with `--tp T --ep T` (the perf-overview MoE recipe):
    every GPU an attention rank with its own requests and KV, the MoE layers expert-parallel over
    all T, i.e. SGLang's `--tp T --dp T --enable-dp-attention --ep T`. Its MoE communication on the
    perf-overview's 8-GPU boards (no MNNVL) is an all-gather of every rank's tokens and a
    reduce-scatter of the outputs: `moe_a2a_backend: allgather_reducescatter` (sim/cost/expert_parallel.py)."""
    if str(value).lower() not in ("true", "1"):
        return {}
    return {"dp": case.tp, "enable_dp_attention": True, "ep": case.tp, "moe_a2a_backend": "allgather_reducescatter"}


# engine layout settings under another engine's name -> infersim's layout keys
ENGINE_LAYOUT_ARGS = {"enable_attention_dp": _trtllm_attention_dp}


RANDOM_LENGTHS_SEED = 0  # the benchmark's random dataset (vLLM's benchmark_serving) draws with --seed 0


def case_workload(case: Case, n_requests: int) -> Trace | ClosedLoop:
    """Fixed-length requests (or lengths drawn uniformly from [int(r x L), L] when the case's
    workload_args give `range_ratio=r`, the benchmark's random dataset), or for `sharegpt` the first
    `n_requests` ShareGPT pairs vLLM's benchmark would draw (seed 0) from the table tokenized for the
    case's model; all at t = 0 unless a closed loop sends them."""
    if case.workload == "sharegpt":
        table = table_for_model(model_name(case.case_id, case.model))
        prompt, output = sample_like_vllm(*load_table(table), n_requests, SHAREGPT_SEED, where=case.case_id)
    else:
        prompt, output = _fixed_or_random_lengths(case, n_requests)
    trace = Trace(np.zeros(n_requests), prompt, output, source=f"validation case {case.case_id}")
    if case.workload == "closed_loop":
        return ClosedLoop(trace, concurrency=int(case.concurrency))
    return trace


def range_ratio(case: Case) -> float | None:
    """The case's `range_ratio` workload argument (None: fixed lengths; sim.validate.cases checked it)."""
    text = case.workload_args.get("range_ratio")
    return None if text is None else float(text)


def _fixed_or_random_lengths(case: Case, n_requests: int) -> tuple[np.ndarray, np.ndarray]:
    """Input and output lengths: the case's, or uniform integers in [int(ratio x L), L] (the random
    dataset of vLLM's benchmark_serving: `randint(int(L * range_ratio), L + 1)`, inputs drawn first)."""
    ratio = range_ratio(case)
    if ratio is None:
        fixed = (case.input_len, case.output_len)
        return tuple(np.full(n_requests, length, dtype=np.int64) for length in fixed)  # type: ignore[return-value]
    rng = np.random.default_rng(RANDOM_LENGTHS_SEED)
    lengths = []
    for length in (int(case.input_len), int(case.output_len)):
        lengths.append(rng.integers(max(int(length * ratio), 1), length + 1, size=n_requests, dtype=np.int64))
    return lengths[0], lengths[1]


_LATENCY_METRICS = {  # metric -> (summary key, statistic)
    "mean_e2e_latency_ms": ("e2e_s", "mean"), "median_e2e_latency_ms": ("e2e_s", "p50"),
    "p99_e2e_latency_ms": ("e2e_s", "p99"), "mean_ttft_ms": ("ttft_s", "mean"), "median_ttft_ms": ("ttft_s", "p50"),
    "p99_ttft_ms": ("ttft_s", "p99"), "mean_tpot_ms": ("tpot_s", "mean"), "median_tpot_ms": ("tpot_s", "p50"),
    "p99_tpot_ms": ("tpot_s", "p99"),
}


def _metric(summary: dict, metric: str, n_gpus: int) -> float:
    if metric in _LATENCY_METRICS:
        key, statistic = _LATENCY_METRICS[metric]
        return summary[key][statistic] * 1e3
    if metric == "request_throughput_req_s":
        return summary["request_throughput"]
    if metric == "output_throughput_per_gpu_tok_s":
        return summary["output_throughput_tok_s"] / n_gpus
    return summary["output_throughput_tok_s"]


def predict(case: Case, engine: str | None = None, max_sim_requests: int = DEFAULT_MAX_SIM_REQUESTS,
            hardware: str | None = None) -> Prediction:
    """Simulate `case` (at most `max_sim_requests` of its requests; throughput is a steady-state
    rate) and read its metric. A config the simulator refuses (weights do not fit, a dtype the
    GPU has no tensor cores for) comes back as `cannot express: <why>`, never skipped."""
    cfg = case_config(case, engine, hardware)
    reason = cannot_express(case)
    if reason is not None:
        return Prediction(case, None, reason, 0, cfg.engine or "")
    if case.workload == "shared_prefix_stages":
        return _predict_staged(case, cfg)
    if case.workload == "steady_decode":  # a decode server alone at a fixed batch (sim/validate/steady_decode.py)
        value, why = predict_steady_decode(case, cfg)
        return Prediction(case, value, why, 0, cfg.engine or "")
    n = min(case.num_requests, max_sim_requests) if case.workload != "fixed_batch" else case.num_requests
    try:
        summary, reject_reason = _simulated_summary(cfg, case, n)
    except InputError as exc:
        return Prediction(case, None, exc.line(), 0, cfg.engine or "")
    if summary["n_finished"] < n:
        return Prediction(case, None, f"{summary['n_rejected']} of {n} requests rejected ({reject_reason})", n,
                          cfg.engine or "")
    return Prediction(case, _metric(summary, case.metric, case.tp * case.pp), "", n, cfg.engine or "")


_SUMMARIES: dict[tuple, tuple[dict, str]] = {}  # the last few simulations (one measured run has several metric rows)
_SUMMARIES_KEPT = 32


def _simulated_summary(cfg: EngineConfig, case: Case, n_requests: int) -> tuple[dict, str]:
    """(the run's summary, the first reject reason) of simulating `case`'s workload under `cfg`; rows
    of one measured run (same config, model and workload, other metric) share one simulation."""
    key = (cfg.model_dump_json(), case.model, case.workload, case.input_len, case.output_len, case.concurrency,
           tuple(sorted(case.workload_args.items())), n_requests)
    if key not in _SUMMARIES:
        result = simulate(cfg, case_workload(case, n_requests))
        if len(_SUMMARIES) >= _SUMMARIES_KEPT:
            _SUMMARIES.pop(next(iter(_SUMMARIES)))
        _SUMMARIES[key] = (summarize(result), str(next(iter(result.table.reject_reason.values()), "")))
    return _SUMMARIES[key]


def _predict_staged(case: Case, cfg: EngineConfig) -> Prediction:
    """A shared_prefix_stages row: its stage's metric from one (cached) simulation of the whole run."""
    staged, stage = parse_staged(case.case_id, case.workload_args)
    try:
        stats = simulate_stages(cfg, staged)[stage]
    except InputError as exc:
        return Prediction(case, None, exc.line(), 0, cfg.engine or "")
    if case.workload_args.get("measured") == "overloaded":
        return Prediction(case, None, "the measured server did not keep up (client timeouts): its latencies cover "
                                      "only the requests that finished", staged.n_requests, cfg.engine or "",
                          kept_up=stats.kept_up)
    if stats.n_rejected:
        return Prediction(case, None, f"{stats.n_rejected} requests of stage {stage} rejected", staged.n_requests,
                          cfg.engine or "")
    value = getattr(stats, case.metric, None)
    if value is None:
        return Prediction(case, None, f"metric {case.metric} is not read from staged runs", 0, cfg.engine or "")
    return Prediction(case, float(value), "", staged.n_requests, cfg.engine or "", kept_up=stats.kept_up)
