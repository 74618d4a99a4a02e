"""Re-simulation fit of engine terms on simulated per-request runs whose true terms are known.

For each preset: a run of 175 requests (25 at 0.3 req/s, then 150 at 30 req/s; Llama-3.1-8B on
H100) is simulated with known per-step / per-sequence terms, written as a `vllm bench serve
--save-detailed` JSON, read back and fitted from the preset's own terms
(sim.validate.measured.refit). Prints true vs fitted terms, the loss before / after, the median
|E2E error| after, simulations and wall time. Also the steady-load case (200 requests at 12 req/s)
where only the sum at the typical batch is identifiable.

    python bench/bench_measured_refit.py
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from pathlib import Path

import numpy as np

from sim.inputs.engines.overhead import EngineOverhead
from sim.inputs.engines.preset import load_engine
from sim.validate.measured import load_measured
from sim.validate.measured.export import simulated_run, write_vllm_bench
from sim.validate.measured.refit import refit_overhead
from sim.validate.measured.replay import predict_requests, residual_report, run_config
from sim.validate.measured.run import build_run


def _shape(varied: bool):
    rng = np.random.default_rng(7 if varied else 1)
    if varied:
        arrival = np.concatenate([np.cumsum(rng.exponential(1 / 0.3, 25)),
                                  100 + np.cumsum(rng.exponential(1 / 30, 150))])
    else:
        arrival = np.cumsum(rng.exponential(1 / 12, 200))
    n = arrival.size
    return build_run("shape", "bench", arrival, rng.integers(20, 800, n), rng.integers(10, 300, n),
                     np.full(n, 0.1), np.full(n, 1.0))


def main() -> None:
    cases = [("vllm", True, 2500.0, 30.0), ("vllm", False, 2500.0, 30.0), ("trtllm", True, 6336.0, 97.5),
             ("lmdeploy", True, 2450.0, 60.0)]
    print(f"{'preset':<9} {'load':<7} {'true step/seq us':>17} {'fitted step/seq us':>19} {'loss before':>11} "
          f"{'after':>7} {'|E2E| med':>9} {'sims':>4} {'wall s':>6}")
    for engine, varied, step_us, seq_us in cases:
        shape = _shape(varied)
        cfg = run_config(shape, engine, "llama-3.1-8b", "h100")
        start = EngineOverhead.from_preset(load_engine(engine))
        true = dataclasses.replace(start, per_step_s=step_us * 1e-6, per_seq_s=seq_us * 1e-6)
        path = Path(tempfile.mkdtemp()) / "run.json"
        write_vllm_bench(simulated_run(shape, predict_requests(cfg, shape, true)), path)
        run = load_measured(path)
        wall_start_s = time.perf_counter()
        fit = refit_overhead(cfg, run, start)
        wall_s = time.perf_counter() - wall_start_s
        after = residual_report(run, predict_requests(cfg, run, fit.overhead))
        fitted = f"{fit.overhead.per_step_s * 1e6:.0f} / {fit.overhead.per_seq_s * 1e6:.1f}"
        print(f"{engine:<9} {'varied' if varied else 'steady':<7} {f'{step_us:.0f} / {seq_us:.1f}':>17} "
              f"{fitted:>19} {fit.loss_before:>11.4f} {fit.loss_after:>7.4f} "
              f"{after['e2e']['abs']['median']:>9.2%} {fit.n_simulations:>4} {wall_s:>6.1f}")


if __name__ == "__main__":
    main()
