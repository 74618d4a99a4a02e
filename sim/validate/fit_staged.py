"""Fitting an async-scheduling engine's terms to open-loop serving runs (`shared_prefix_stages`).

Open loop, a step's duration moves when later requests join, so the closed form of
`sim.validate.fit` does not apply: every trial is simulated. Two terms are fitted, each where the
data identifies it:
- `residue_us`: the part of the engine's per-step CPU work that does not overlap the GPU step under
  async scheduling. It moves every step, so per-token time and E2E. Searched on a grid, one
  simulation of every fit run per trial, refined around the best.
- `frontend_ms`: the API server's request path (sim.engine.frontend). It adds to TTFT and E2E and
  changes no step, so for each trial it is solved in closed form (a fine grid over the simulated
  values, no simulation).
The per-step / per-sequence CPU terms stay as given: overlapped with GPU steps longer than them,
they change nothing these runs measure (they are not identifiable here).
Objective: mean |relative error| over every fit row (E2E, TTFT and per-token time alike).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from sim.inputs.engines.overhead import EngineOverhead
from sim.validate.cases import Case
from sim.validate.run import case_config
from sim.validate.staged import parse_staged, simulate_stages

FITTED_METRICS = ("mean_e2e_latency_ms", "mean_ttft_ms", "mean_tpot_ms")  # tails are reported, not fitted
RESIDUE_GRID_US = (0.0, 250.0, 500.0, 750.0, 1000.0, 1500.0, 2000.0)
FRONTEND_GRID_MS = np.arange(0.0, 40.0, 0.1)


def _rows(cases: list[Case], engine: str | None, over: EngineOverhead) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(simulated value without front end, measured value, 1 where the front end adds) per case."""
    sim_values, measured, adds = [], [], []
    for case in cases:
        staged, stage = parse_staged(case.case_id, case.workload_args)
        stats = simulate_stages(case_config(case, engine), staged, dataclasses.replace(over, frontend_s=0.0))[stage]
        sim_values.append(getattr(stats, case.metric))
        measured.append(case.value)
        adds.append(case.metric in ("mean_ttft_ms", "mean_e2e_latency_ms"))
    return np.array(sim_values), np.array(measured), np.array(adds, dtype=float)


def _best_frontend(sim_values: np.ndarray, measured: np.ndarray, adds: np.ndarray) -> tuple[float, float]:
    """(frontend ms, mean |rel error|) minimising the error over FRONTEND_GRID_MS."""
    errors = [float(np.mean(np.abs((sim_values + d * adds) / measured - 1.0))) for d in FRONTEND_GRID_MS]
    best = int(np.argmin(errors))
    return float(FRONTEND_GRID_MS[best]), errors[best]


def fit_staged(cases: list[Case], start: EngineOverhead, engine: str | None = None,
               progress=None) -> tuple[EngineOverhead, float]:
    """(start with the fitted residue and front end, the fit's mean |rel error|) on `cases` (fit rows
    of staged runs that the measured server kept up with)."""
    usable = [c for c in cases if c.workload == "shared_prefix_stages" and c.metric in FITTED_METRICS
              and c.workload_args.get("measured") != "overloaded"]
    if not usable:
        raise ValueError("no shared_prefix_stages case to fit")
    trials: dict[float, tuple[float, float]] = {}

    def trial(residue_us: float) -> float:
        over = dataclasses.replace(start, residue_s=residue_us * 1e-6)
        frontend_ms, error = _best_frontend(*_rows(usable, engine, over))
        trials[residue_us] = (frontend_ms, error)
        if progress is not None:
            progress(f"residue {residue_us:.0f} us: frontend {frontend_ms:.1f} ms, mean |error| {error:.2%}")
        return error

    grid = list(RESIDUE_GRID_US)
    for residue in grid:
        trial(residue)
    step = grid[1] - grid[0]
    for _ in range(2):  # refine around the best
        best = min(trials, key=lambda r: trials[r][1])
        step /= 2
        for residue in (best - step, best + step):
            if residue >= 0 and residue not in trials:
                trial(residue)
    best = min(trials, key=lambda r: trials[r][1])
    frontend_ms, error = trials[best]
    return dataclasses.replace(start, residue_s=best * 1e-6, frontend_s=frontend_ms * 1e-3), error
