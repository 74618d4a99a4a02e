"""Fitting an engine's overhead terms (per step, per sequence, per token) to measured results.

Every case is simulated once with the engine's overhead set to zero, recording its executed
steps (sequences, tokens, decode-only, and the step time, which is then the GPU time alone).
When all requests are queued at t=0 (`fixed_batch`, `infinite_rate`), or identical requests come
from a closed loop without think time (each client's next request joins at the step after its
last one ends, whatever the step durations), the schedule does not depend on step durations, so
the run time under any overhead terms is a closed-form sum over those steps and the fit needs no
more simulations. The fit minimises the mean (or median) |relative error| over the cases by a
coarse-to-fine grid; callers re-simulate with the fitted terms to report the true after-error
(never the closed form).
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

import numpy as np

from sim.errors import InputError
from sim.inputs.engines.overhead import EngineOverhead
from sim.inputs.engines.preset import load_engine
from sim.run.simulate import simulate
from sim.run.summary import summarize
from sim.validate.cases import Case
from sim.validate.run import DEFAULT_MAX_SIM_REQUESTS, _metric, cannot_express, case_config, case_workload

FITTABLE_WORKLOADS = ("fixed_batch", "infinite_rate", "closed_loop")  # fixed lengths, no think time
LATENCY_METRICS = ("mean_e2e_latency_ms",)
THROUGHPUT_METRICS = ("request_throughput_req_s", "output_throughput_tok_s")
# search ranges (microseconds): wide enough for Python engines at thousands of sequences
PER_STEP_US = (0.0, 20_000.0)
PER_SEQ_US = (0.0, 400.0)
PER_TOKEN_US = (0.0, 40.0)


@dataclass
class TappedCase:
    case: Case
    n_seqs: np.ndarray
    n_tokens: np.ndarray
    decode_only: np.ndarray
    gpu_s: np.ndarray
    base_metric: float  # the metric simulated with zero overhead
    base_total_s: float

    def metric(self, over: EngineOverhead) -> float:
        cpu = over.per_step_s + over.per_seq_s * self.n_seqs
        cpu = np.where(self.decode_only, cpu / over.num_scheduler_steps, cpu) + over.per_token_s * self.n_tokens
        total = float(over.combine(self.gpu_s, cpu).sum())
        if self.case.metric in THROUGHPUT_METRICS:  # all requests queued at t=0: the front end shifts the end
            return self.base_metric * self.base_total_s / (total + over.frontend_s)
        return self.base_metric * total / self.base_total_s + over.frontend_s * 1e3


def zero_overhead(over: EngineOverhead) -> EngineOverhead:
    """The engine terms the closed form sums (CPU per step, residue) zeroed; the front end too
    (it is added per request, `TappedCase.metric`)."""
    return dataclasses.replace(over, per_step_s=0.0, per_seq_s=0.0, per_token_s=0.0, residue_s=0.0,
                               frontend_s=0.0)


def tap_case(case: Case, engine: str, max_sim_requests: int = DEFAULT_MAX_SIM_REQUESTS) -> TappedCase | str:
    """Simulate `case` with zero engine overhead, keeping its steps; a reason string if it cannot
    be used for fitting (cannot express, or a metric the closed form does not cover)."""
    if case.workload not in FITTABLE_WORKLOADS or case.metric not in LATENCY_METRICS + THROUGHPUT_METRICS:
        return f"not fittable: {case.workload} / {case.metric}"
    cfg = case_config(case, engine)
    reason = cannot_express(case)
    if reason is not None:
        return f"cannot express: {reason}"
    over = EngineOverhead.for_run(load_engine(cfg.engine), cfg)
    if case.workload == "closed_loop" and over.frontend_s > 0:
        return ("not fittable in closed form: the preset's front end delays each client's next request, so "
                "the schedule depends on step durations")
    n = min(case.num_requests, max_sim_requests) if case.workload != "fixed_batch" else case.num_requests
    try:
        result = simulate(cfg.model_copy(update={"record_steps": True}), case_workload(case, n),
                          overhead=zero_overhead(over))
    except InputError as exc:
        return f"cannot express: {exc.line()}"
    summary = summarize(result)
    steps = result.recorder.steps_frame()
    if summary["n_finished"] < n or steps.empty:
        return "cannot express: requests rejected"
    prefill = steps["prefill_tokens"].to_numpy(dtype=float)
    gpu_s = steps["step_time_s"].to_numpy(dtype=float)
    return TappedCase(case, steps["batch_size"].to_numpy(dtype=float), prefill + steps["decode_tokens"].to_numpy(),
                      prefill == 0, gpu_s, _metric(summary, case.metric, case.tp * case.pp),
                      float(result.sim_duration_s))


OBJECTIVES = ("mean", "median")


def abs_errors(tapped: list[TappedCase], over: EngineOverhead) -> np.ndarray:
    return np.array([abs(t.metric(over) / t.case.value - 1.0) for t in tapped])


def objective_error(tapped: list[TappedCase], over: EngineOverhead, objective: str = "median") -> float:
    """The fit's loss: median |relative error| (what validation reports; ignores a minority of
    cases the GPU model gets wrong) or mean |relative error|."""
    errors = abs_errors(tapped, over)
    return float(np.median(errors) if objective == "median" else np.mean(errors))


IMPROVEMENT_TO_ADD_A_TERM = 0.005  # a term joins the fit only if it cuts the mean |error| by 0.5 points


def fit_overhead(tapped: list[TappedCase], start: EngineOverhead, objective: str = "mean") -> EngineOverhead:
    """Fit per_step alone, then with per_seq, then with per_token; keep the smallest model within
    0.5 points of the best. Data where every step has the same size (a fixed batch) cannot tell
    per-step from per-sequence cost, and this keeps it from splitting them arbitrarily."""
    if not tapped:
        raise InputError("calibrate engine", None, "no case usable for fitting (all cannot be expressed)")
    if objective not in OBJECTIVES:
        raise InputError("--objective", None, f"one of {', '.join(OBJECTIVES)}")
    fits = [_grid_fit(tapped, start, n_terms, objective) for n_terms in (1, 2, 3)]
    errors = [objective_error(tapped, f, objective) for f in fits]
    best = min(errors)
    return next(f for f, e in zip(fits, errors) if e <= best + IMPROVEMENT_TO_ADD_A_TERM)


def _grid_fit(tapped: list[TappedCase], start: EngineOverhead, n_terms: int, objective: str, rounds: int = 4,
              points: int = 9) -> EngineOverhead:
    """Grid search over the first `n_terms` of (per_step, per_seq, per_token) >= 0 (the others 0),
    narrowing around the best point each round; overlap, residue, multi-step and graph sizes stay."""
    ranges = [r if i < n_terms else (0.0, 0.0) for i, r in enumerate((PER_STEP_US, PER_SEQ_US, PER_TOKEN_US))]
    best = start = dataclasses.replace(start, per_step_s=0.0, per_seq_s=0.0, per_token_s=0.0)
    best_err = objective_error(tapped, start, objective)
    for _ in range(rounds):
        grids = [np.linspace(lo, hi, points) for lo, hi in ranges]
        for step_us, seq_us, tok_us in itertools.product(*grids):
            trial = dataclasses.replace(start, per_step_s=step_us * 1e-6, per_seq_s=seq_us * 1e-6,
                                        per_token_s=tok_us * 1e-6)
            err = objective_error(tapped, trial, objective)
            if err < best_err - 1e-12:
                best, best_err = trial, err
        centre = (best.per_step_s * 1e6, best.per_seq_s * 1e6, best.per_token_s * 1e6)
        ranges = [(max(0.0, c - (hi - lo) / (points - 1)), c + (hi - lo) / (points - 1))
                  for c, (lo, hi) in zip(centre, ranges)]
    return best
