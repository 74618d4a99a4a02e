"""Replay one validation case through the simulator with its engine's preset."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.config import EngineConfig
from sim.errors import InputError
from sim.simulate import simulate
from sim.summary import summarize
from sim.trace import ClosedLoop, Trace
from sim.validate.cases import Case
from sim.validate.limits import DEFAULT_MAX_SIM_REQUESTS
from sim.validate.names import dtype_name, engine_name, gpu_name, model_name

SHAREGPT_REASON = ("the ShareGPT lengths vLLM's benchmark samples (first turn of each conversation, mean ~215 "
                   "prompt / ~200 output tokens) are not bundled; the bundled ShareGPT stats are whole multi-turn "
                   "conversations (mean 2,340 prompt / 439 output tokens)")


@dataclass(frozen=True)
class Prediction:
    case: Case
    predicted: float | None  # None: cannot express
    reason: str = ""  # why the case cannot be expressed
    n_simulated: int = 0
    engine: str = ""

    @property
    def error(self) -> float | None:
        """Signed relative error (predicted - measured) / measured."""
        return None if self.predicted is None else (self.predicted - self.case.value) / self.case.value


def case_config(case: Case, engine: str | None = None) -> EngineConfig:
    """The config of a case: its engine's preset, its model/GPU/TP/dtypes, its engine_args on top.
    Unknown names raise InputError (bad input, exit 2)."""
    where = case.case_id
    data: dict = {
        "engine": engine or engine_name(where, case.engine),
        "model": model_name(where, case.model),
        "hardware": gpu_name(where, case.gpu),
        "tp": case.tp,
        "weight_dtype": dtype_name(where, "weight_dtype", case.weight_dtype),
    }
    if case.kv_dtype:
        data["kv_dtype"] = dtype_name(where, "kv_dtype", case.kv_dtype)
    longest = (case.input_len or 0) + (case.output_len or 0)
    if longest:
        data["max_model_len"] = max(longest + 1, 2048)
    data.update({key: value for key, value in case.engine_args.items() if key not in UNMODELLED_ARGS})
    return EngineConfig.model_validate(data)


def cannot_express(case: Case) -> str | None:
    """Why a well-formed case has no faithful simulation (None when it has one)."""
    if case.workload == "sharegpt":
        return SHAREGPT_REASON
    for key, reason in UNMODELLED_ARGS.items():
        if key in case.engine_args:
            return reason
    return None


# engine settings of a measured run the simulator cannot reproduce yet: the row is kept, and
# reported as `cannot express: <why>`
UNMODELLED_ARGS = {
    "enable_attention_dp": "the run used expert parallelism with data-parallel attention (TensorRT-LLM --ep, "
                           "enable_attention_dp); infersim models tensor parallelism only until the EP/DP layout lands",
}


def case_workload(case: Case, n_requests: int) -> Trace | ClosedLoop:
    prompt = np.full(n_requests, case.input_len, dtype=np.int64)
    output = np.full(n_requests, case.output_len, dtype=np.int64)
    trace = Trace(np.zeros(n_requests), prompt, output, source=f"validation case {case.case_id}")
    if case.workload == "closed_loop":
        return ClosedLoop(trace, concurrency=int(case.concurrency))
    return trace


def _metric(summary: dict, metric: str) -> float:
    if metric == "mean_e2e_latency_ms":
        return summary["e2e_s"]["mean"] * 1e3
    if metric == "mean_ttft_ms":
        return summary["ttft_s"]["mean"] * 1e3
    if metric == "mean_tpot_ms":
        return summary["tpot_s"]["mean"] * 1e3
    if metric == "request_throughput_req_s":
        return summary["request_throughput"]
    return summary["output_throughput_tok_s"]


def predict(case: Case, engine: str | None = None, max_sim_requests: int = DEFAULT_MAX_SIM_REQUESTS) -> Prediction:
    """Simulate `case` (at most `max_sim_requests` of its requests; throughput is a steady-state
    rate) and read its metric. A config the simulator refuses (weights do not fit, a dtype the
    GPU has no tensor cores for) comes back as `cannot express: <why>`, never skipped."""
    cfg = case_config(case, engine)
    reason = cannot_express(case)
    if reason is not None:
        return Prediction(case, None, reason, 0, cfg.engine or "")
    n = min(case.num_requests, max_sim_requests) if case.workload != "fixed_batch" else case.num_requests
    try:
        result = simulate(cfg, case_workload(case, n))
    except InputError as exc:
        return Prediction(case, None, exc.line(), 0, cfg.engine or "")
    summary = summarize(result)
    if summary["n_finished"] < n:
        return Prediction(case, None, f"{summary['n_rejected']} of {n} requests rejected "
                                      f"({next(iter(result.table.reject_reason.values()), '')})", n, cfg.engine or "")
    return Prediction(case, _metric(summary, case.metric), "", n, cfg.engine or "")
