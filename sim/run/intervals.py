"""Prediction intervals: N seeded replays with a perturbed cost model, and what is extrapolated.

`prediction_intervals` runs `n` replays of a config. Replay i draws one time scale per op class
from the profile's uncertainty (`sim.cost.uncertainty`) with `default_rng([cfg.seed, i])`, and,
for synthetic workloads (a spec YAML or a length-only trace, whose arrivals come from the seed),
re-samples the workload with seed `cfg.seed + 1 + i`. The result gives p10/p50/p90 over the
replays of every latency statistic and of the throughputs (`summary.json` `intervals`).
`band` is the same percentile triple for any list of values (the planner can call it on the
capacities it finds under perturbed cost models: `perturbed_cost_scales` gives the draws).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from sim.cost import CostModel
from sim.cost.extrapolation import extrapolation_reasons
from sim.cost.uncertainty import class_sigmas, draw_time_scale
from sim.errors import InputError
from sim.inputs.budget import MAX_REPLAYS, MAX_REQUEST_RUNS, require
from sim.inputs.config import EngineConfig
from sim.inputs.hardware import load_hardware
from sim.inputs.model import load_model
from sim.inputs.workload.trace import ClosedLoop, Trace
from sim.run.simulate import simulate
from sim.run.summary import summarize

LATENCY_KEYS = ("ttft_s", "tpot_s", "itl_s", "e2e_s", "queue_delay_s")
LATENCY_STATS = ("mean", "p50", "p90", "p99")
THROUGHPUT_KEYS = ("request_throughput", "output_throughput_tok_s", "input_throughput_tok_s")
BAND = (10, 50, 90)


def band(values) -> dict[str, float | None]:
    """{"p10", "p50", "p90"} of the finite values (None when there are none)."""
    finite = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=np.float64)
    if finite.size == 0:
        return {f"p{q}": None for q in BAND}
    return {f"p{q}": float(np.percentile(finite, q)) for q in BAND}


def _cost_model(cfg: EngineConfig) -> CostModel:
    return CostModel(load_model(cfg.model), load_hardware(cfg.hardware), cfg.tp, cfg.weight_dtype, cfg.kv_dtype,
                     cfg.block_size, allreduce_kind=cfg.allreduce_kind or "nccl")  # fmt: skip


def perturbed_cost_scales(cfg: EngineConfig, n: int) -> list[dict[str, float]]:
    """The `n` time-scale draws `prediction_intervals` uses (from the first replica's profile)."""
    sigmas = class_sigmas(_cost_model(cfg))
    return [draw_time_scale(sigmas, np.random.default_rng([cfg.seed, i])) for i in range(n)]


def check_replays(n: int, n_requests: int | None = None) -> None:
    """InputError unless `n` replays (of `n_requests` requests each) fit sim.inputs.budget."""
    if not 2 <= n <= MAX_REPLAYS:
        raise InputError("--uncertainty", None,
                         f"at least 2 and at most {MAX_REPLAYS:,} replays, or leave it out (got {n})")
    if n_requests is not None:
        require(n * n_requests, MAX_REQUEST_RUNS, "simulated requests", f"{n:,} draws x {n_requests:,} requests",
                "--uncertainty")


def prediction_intervals(cfg: EngineConfig, workload: Trace | ClosedLoop, n: int,
                         resample: Callable[[int], Trace | ClosedLoop] | None = None,
                         run_tasks: Callable | None = None) -> dict:
    """`intervals` for summary.json from `n` perturbed replays; `resample(seed)` reloads a
    synthetic workload with another seed (None: every replay uses `workload`). `run_tasks(fn,
    arg_tuples)` (a backend's: yields (index, result) as tasks end) runs the replays, e.g. in
    worker processes; by default they run here, one after another. The result does not depend on it."""
    check_replays(n)
    summaries: list[dict | None] = [None] * n
    replays = _Replays(cfg, workload, resample, perturbed_cost_scales(cfg, n))
    for index, summary in (run_tasks or _one_by_one)(replay_summary, replays):
        summaries[index] = summary
    out: dict = {"n_replays": n, "arrivals_resampled": resample is not None,
                 "method": "p10/p50/p90 over replays; cost-model time scales drawn from the profile's uncertainty"}
    for key in LATENCY_KEYS:
        out[key] = {stat: band(s[key].get(stat) for s in summaries) for stat in LATENCY_STATS}
    for key in THROUGHPUT_KEYS:
        out[key] = band(s[key] for s in summaries)
    return out


def replay_summary(cfg: EngineConfig, workload: Trace | ClosedLoop, time_scale: dict[str, float]) -> dict:
    """The summary of one perturbed replay (a task: may run in a worker process)."""
    return summarize(simulate(cfg, workload, time_scale=time_scale))


class _Replays(Sequence):
    """(cfg, workload, time scale) of each replay; a resampled workload is drawn only when its
    replay is handed out."""

    def __init__(self, cfg: EngineConfig, workload, resample, scales: list[dict[str, float]]):
        self.cfg, self.workload, self.resample, self.scales = cfg, workload, resample, scales

    def __len__(self) -> int:
        return len(self.scales)

    def __getitem__(self, i: int) -> tuple:
        if not 0 <= i < len(self.scales):
            raise IndexError(i)
        workload = self.resample(self.cfg.seed + 1 + i) if self.resample is not None else self.workload
        return self.cfg, workload, self.scales[i]


def _one_by_one(fn: Callable, arg_tuples: Sequence[tuple]):
    for index in range(len(arg_tuples)):
        yield index, fn(*arg_tuples[index])


def run_extrapolating(cfg: EngineConfig) -> list[str]:
    """summary.json `extrapolating`: reasons over every replica hardware kind of the run."""
    model = load_model(cfg.model)
    reasons: list[str] = []
    for hw_name in dict.fromkeys(cfg.hardware_of_replicas()):
        cost = CostModel(model, load_hardware(hw_name), cfg.tp, cfg.weight_dtype, cfg.kv_dtype, cfg.block_size)
        for reason in extrapolation_reasons(cost, cfg.max_num_batched_tokens, cfg.max_num_seqs):
            if reason not in reasons:
                reasons.append(reason)
    return reasons


def band_over_draws(cfg: EngineConfig, n: int, evaluate: Callable[[dict[str, float]], float]) -> dict:
    """p10/p50/p90 of `evaluate(time_scale)` over the same `n` draws `prediction_intervals` uses.
    For the planner: `evaluate` = the highest rate meeting the SLOs when every simulation of the
    search runs `simulate(cfg, workload, time_scale=time_scale)`; the result is its capacity band."""
    check_replays(n)
    return band(evaluate(scale) for scale in perturbed_cost_scales(cfg, n)) | {"n_draws": n}
