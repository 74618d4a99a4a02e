"""Fitting engine overhead terms to a measured open-loop run by re-simulating it.

The closed-form fit (sim.validate.fit) needs schedules that do not depend on step durations;
an open-loop trace has none (a slower step lets more arrivals join the next batch), and the
per-request errors are too rugged in the terms for a plain grid or pattern search (a change of
a few microseconds moves a request across a step boundary). So the fit is Gauss-Newton on a
frozen schedule, re-simulating at every iterate:

1. simulate the run at the current terms, keeping its steps;
2. with that schedule frozen, a request's E2E (TTFT) is the steps it waited through, from its
   arrival to its last (first) token, so its derivative in (per_step, per_seq, per_token) is
   the sum over those steps of (1, sequences, tokens) (zero for steps whose CPU time is hidden
   behind the GPU in overlapped presets; when every step's CPU time is hidden, all count 1, as if
   not overlapped, to find the way out of the flat region);
3. solve the bounded linear least squares (terms >= 0) of the relative E2E, ITL and TTFT
   errors per request, step there, and repeat until the step is below `TOLERANCE_US` or after
   `max_iterations`; the iterate with the lowest `replay.loss` is returned (re-simulated, never
   the linear model's value).

Terms are only as identifiable as the run: a run at one steady batch size cannot tell
per-step from per-sequence cost, so measure one whose load varies. Deterministic.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from scipy.optimize import lsq_linear

from sim.inputs.config import EngineConfig
from sim.inputs.engines.overhead import EngineOverhead
from sim.run.simulate import simulate
from sim.run.summary import requests_columns
from sim.validate.measured.replay import loss
from sim.validate.measured.run import MeasuredRun

TERMS = ("per_step_s", "per_seq_s", "per_token_s")
TOLERANCE_US = 0.5
UPPER_US = {"per_step_s": 50_000.0, "per_seq_s": 2_000.0, "per_token_s": 200.0}


@dataclass(frozen=True)
class RefitResult:
    overhead: EngineOverhead
    loss_before: float
    loss_after: float
    n_simulations: int


def _sensitivities(steps, over: EngineOverhead, since_s: np.ndarray, until_s: np.ndarray, replicas: np.ndarray,
                   terms: tuple[str, ...]) -> np.ndarray:
    """d(until - since) / d(term) per request: the sum of each term's feature over the steps of
    the request's replica that start in [since, until), i.e. the steps it waited through."""
    out = np.zeros((since_s.size, len(terms)))
    for replica in np.unique(replicas):
        s = steps[steps["replica"] == replica]
        start = s["start_s"].to_numpy()
        dur = s["step_time_s"].to_numpy()
        n_seq = s["batch_size"].to_numpy(dtype=float)
        n_tok = (s["prefill_tokens"] + s["decode_tokens"]).to_numpy(dtype=float)
        scheduled = np.where(s["prefill_tokens"].to_numpy() == 0, 1.0 / over.num_scheduler_steps, 1.0)
        counts = np.ones_like(dur)
        if over.overlap:  # CPU time counts only where it, not the GPU, sets the step
            cpu = (over.per_step_s + over.per_seq_s * n_seq) * scheduled + over.per_token_s * n_tok
            counts = (cpu >= dur - over.residue_s - 1e-12).astype(float)
            if not counts.any():  # all CPU hidden: no local slope; step as if it were not (re-simulation judges)
                counts = np.ones_like(dur)
        feats = {"per_step_s": counts * scheduled, "per_seq_s": counts * scheduled * n_seq,
                 "per_token_s": counts * n_tok}
        mine = replicas == replica
        lo = np.searchsorted(start, since_s[mine] - 1e-12, side="left")
        hi = np.searchsorted(start, until_s[mine] - 1e-12, side="left")
        for k, term in enumerate(terms):
            cum = np.concatenate([[0.0], np.cumsum(feats[term])])
            out[mine, k] = cum[hi] - cum[lo]
    return out


def _simulate(cfg: EngineConfig, run: MeasuredRun, over: EngineOverhead):
    result = simulate(cfg.model_copy(update={"record_steps": True}), run.to_trace(), overhead=over)
    cols = requests_columns(result)
    order = run.order()
    predicted = {"finished": np.zeros(len(run), dtype=bool)}
    predicted["finished"][order] = np.asarray(cols["status"]) == "FINISHED"
    for name, column in (("ttft_s", "ttft_s"), ("itl_s", "tpot_s"), ("e2e_s", "e2e_s"),
                         ("first_s", "first_token_s"), ("finish_s", "finish_s"), ("replica", "replica")):
        values = np.empty(len(run))
        values[order] = np.asarray(cols[column], dtype=float)
        predicted[name] = values
    for name in ("ttft_s", "itl_s", "e2e_s"):
        predicted[name] = np.where(predicted["finished"], predicted[name], np.nan)
    return predicted, result.recorder.steps_frame()


def _linear_system(run: MeasuredRun, predicted: dict, steps, over: EngineOverhead, terms):
    ok = predicted["finished"]
    reps = predicted["replica"][ok].astype(np.int64)
    arrival = run.arrival_s[ok]
    d_finish = _sensitivities(steps, over, arrival, predicted["finish_s"][ok], reps, terms)
    d_first = _sensitivities(steps, over, arrival, predicted["first_s"][ok], reps, terms)
    out = run.output_tokens[ok].astype(float)
    multi = out > 1
    rows, resid = [], []
    for meas, pred, grad in ((run.e2e_s[ok], predicted["e2e_s"][ok], d_finish),
                             (run.ttft_s[ok], predicted["ttft_s"][ok], d_first)):
        rows.append(grad / meas[:, None])
        resid.append((pred - meas) / meas)
    itl_meas = run.itl_s[ok][multi]
    rows.append(((d_finish - d_first)[multi] / (out[multi] - 1)[:, None]) / itl_meas[:, None])
    resid.append((predicted["itl_s"][ok][multi] - itl_meas) / itl_meas)
    weights = [1.0 / np.sqrt(max(r.size, 1)) for r in resid]  # each metric weighs the same
    a = np.vstack([r * w for r, w in zip(rows, weights)])
    b = np.concatenate([r * w for r, w in zip(resid, weights)])
    return a, b


def refit_overhead(cfg: EngineConfig, run: MeasuredRun, start: EngineOverhead,
                   terms: tuple[str, ...] = ("per_step_s", "per_seq_s"), max_iterations: int = 12) -> RefitResult:
    """Gauss-Newton on frozen schedules (see module docstring); returns the best iterate."""
    current = start
    predicted, steps = _simulate(cfg, run, current)
    best, best_loss = current, loss(run, predicted)
    loss_before, n_sims = best_loss, 1
    for _ in range(max_iterations):
        if steps.empty:
            break
        a, b = _linear_system(run, predicted, steps, current, terms)
        now_us = np.array([getattr(current, t) * 1e6 for t in terms])
        upper = np.array([UPPER_US[t] for t in terms])
        # the unknown is the new point in microseconds: residual b + a (x - now) * 1e-6
        solution = lsq_linear(a * 1e-6, a @ now_us * 1e-6 - b, bounds=(np.zeros(len(terms)), upper))
        step_us = np.abs(solution.x - now_us).max()
        current = dataclasses.replace(current, **{t: float(v) * 1e-6 for t, v in zip(terms, solution.x)})
        predicted, steps = _simulate(cfg, run, current)
        n_sims += 1
        current_loss = loss(run, predicted)
        if current_loss < best_loss:
            best, best_loss = current, current_loss
        if step_us < TOLERANCE_US:
            break
    return RefitResult(best, loss_before, best_loss, n_sims)
