"""Predicted vs measured J per output token (issue 49): ML.ENERGY Benchmark v3.0 (vLLM 0.11.1) on
H100 and B200, bench/data/power_mlenergy_v3.csv (sources and the split in bench/data/README.md).

Each row is one server configuration at one batch size (vLLM max_num_seqs): simulated as a closed
loop of `batch` clients, max(4 x batch, 200) requests of 256 prompt and 717 output tokens (the
Text Conversation task's mean output, ML.ENERGY v3.0), each length jittered uniformly by +-50 %,
engine preset vllm@0.10 (the newest preset at or below 0.11.1). Predicted J/token: the run's
energy (steps and idle gaps) over its output tokens, as summary.json's `j_per_output_token`.

With --refit, each GPU's (compute_weight, memory_weight) are refitted on that GPU's split=fit rows
only: a grid over both weights minimising the squared log error of J/token, each run's energy
taken as idle + (tdp - idle) x (w_c x its compute-seconds + w_m x its memory-seconds) per GPU
(the steps' utilisations do not depend on the weights; the board-limit clamp is applied to the
run's busy-time mean, an approximation); every row is then simulated again with the fitted weights
(the real per-step model, clamp included) and reported. Nothing is fitted on split=score rows.

    python bench/bench_power.py [--refit] [--gpu b200] [--max-batch 1024]     # ~1-3 CPU minutes
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim.inputs.config import EngineConfig
from sim.inputs.hardware import load_hardware
from sim.inputs.workload.bench import bench_workload
from sim.paths import bundled_dir
from sim.run.energy_summary import energy_summary
from sim.run.simulate import simulate
from sim.run.summary import requests_frame
from sim.yamlio import read_mapping

DATA = Path(__file__).resolve().parent / "data" / "power_mlenergy_v3.csv"
PROMPT_TOKENS, OUTPUT_TOKENS, JITTER = 256, 717, 0.5
ENGINE = "vllm@0.10"
GRID = np.round(np.arange(0.0, 4.001, 0.01), 2)  # PowerModel allows weights up to 4


def load_rows(gpu: str | None, max_batch: int | None) -> list[dict]:
    with DATA.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return [r for r in rows if (gpu is None or r["gpu"] == gpu)
            and (max_batch is None or int(r["batch_size"]) <= max_batch)]


def simulate_row(row: dict, hardware: str) -> dict:
    """One row's simulated run: J/token, fleet watts, output tok/s, and what the refit needs."""
    batch = int(row["batch_size"])
    cfg = EngineConfig(model=row["model"], hardware=hardware, tp=int(row["n_gpus"]), max_num_seqs=batch,
                       engine=ENGINE, weight_dtype=row["weight_dtype"])
    requests = max(4 * batch, 200)
    workload = bench_workload(f"requests={requests},concurrency={batch},isl={PROMPT_TOKENS},osl={OUTPUT_TOKENS},"
                              f"jitter={JITTER}")
    result = simulate(cfg, workload)
    frame = requests_frame(result)
    energy = energy_summary(result, frame)
    if energy is None:
        return {"missing": result.recorder.energy_missing}
    tally = result.recorder.energy
    output_tokens = float(frame.loc[frame["status"] == "FINISHED", "output_tokens"].sum())
    return {"j_per_token": energy["j_per_output_token"], "power_w": energy["mean_power_w"],
            "tok_s": output_tokens / result.sim_duration_s, "duration_s": result.sim_duration_s,
            "busy_s": tally.step_s, "compute_s": tally.compute_s, "memory_s": tally.memory_s,
            "gpus": tally.n_gpus, "output_tokens": output_tokens}


def modelled_j(run: dict, idle_w: float, tdp_w: float, w_c: np.ndarray, w_m: np.ndarray) -> np.ndarray:
    """J/token of a run under weights (w_c, w_m), from its busy-time utilisation sums (see the docstring)."""
    busy, duration = run["busy_s"], run["duration_s"]
    busy_w = idle_w + (tdp_w - idle_w) * (w_c * run["compute_s"] + w_m * run["memory_s"]) / busy
    joules = run["gpus"] * (np.minimum(busy_w, tdp_w) * busy + idle_w * (duration - busy))
    return joules / run["output_tokens"]


def refit(rows: list[dict], runs: list[dict], gpu: str) -> tuple[float, float] | None:
    """(compute_weight, memory_weight) for `gpu` from its split=fit rows, or None when it has none."""
    power = load_hardware(gpu).power
    fit = [(r, run) for r, run in zip(rows, runs, strict=True) if r["gpu"] == gpu and r["split"] == "fit"
           and "j_per_token" in run]
    if not fit:
        return None
    w_c, w_m = np.meshgrid(GRID, GRID, indexing="ij")
    loss = sum((np.log(modelled_j(run, power.idle_w, power.tdp_w, w_c, w_m) / float(r["j_per_output_token"]))) ** 2
               for r, run in fit)
    i, j = np.unravel_index(np.argmin(loss), loss.shape)
    return float(GRID[i]), float(GRID[j])


def profile_with_weights(gpu: str, weights: tuple[float, float], folder: Path) -> str:
    """A copy of the bundled profile with its power weights replaced; returns its path."""
    import yaml

    data = read_mapping(bundled_dir("hwprofiles") / f"{gpu}.yaml")
    data["power"] = {**data["power"], "compute_weight": weights[0], "memory_weight": weights[1]}
    path = folder / f"{gpu}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return str(path)


def report(title: str, rows: list[dict], runs: list[dict]) -> None:
    """Per row predicted vs measured, then the median |error| per configuration and per split."""
    print(f"\n{title}")
    print(f"{'configuration':<28} {'split':<5} {'batch':>5} {'J/tok meas':>10} {'J/tok sim':>9} {'err':>7} "
          f"{'W meas':>7} {'W sim':>7} {'tok/s meas':>10} {'tok/s sim':>9}")
    errors: dict[tuple[str, str], list[float]] = {}
    for r, run in zip(rows, runs, strict=True):
        if "j_per_token" not in run:
            print(f"{r['config']:<28} {r['split']:<5} {r['batch_size']:>5} not metered: {run['missing']}")
            continue
        err = run["j_per_token"] / float(r["j_per_output_token"]) - 1
        errors.setdefault((r["config"], r["split"]), []).append(abs(err))
        print(f"{r['config']:<28} {r['split']:<5} {r['batch_size']:>5} {float(r['j_per_output_token']):>10.4g} "
              f"{run['j_per_token']:>9.4g} {err:>+7.1%} {r['power_w'] or '-':>7} {run['power_w']:>7.0f} "
              f"{r['output_tok_s'] or '-':>10} {run['tok_s']:>9.0f}")
    print("\nmedian |J/token error| by configuration:")
    for (config, split), values in errors.items():
        print(f"  {config:<28} {split:<5} {statistics.median(values):6.1%}  ({len(values)} batch sizes)")
    for split in ("fit", "score"):
        values = [v for (_, s), vs in errors.items() if s == split for v in vs]
        if values:
            print(f"  all {split} rows: median |error| {statistics.median(values):.1%} over {len(values)} rows")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refit", action="store_true", help="refit each GPU's weights on its fit rows, rerun all")
    parser.add_argument("--gpu", help="only this profile's rows (h100-sxm | b200)")
    parser.add_argument("--max-batch", type=int, help="only rows up to this batch size")
    args = parser.parse_args()
    rows = load_rows(args.gpu, args.max_batch)
    runs = [simulate_row(r, r["gpu"]) for r in rows]
    report("bundled weights (hwprofiles/*.yaml power section)", rows, runs)
    if not args.refit:
        return
    with tempfile.TemporaryDirectory() as folder:
        fitted, paths = {}, {}
        for gpu in dict.fromkeys(r["gpu"] for r in rows):
            weights = refit(rows, runs, gpu)
            if weights is not None:
                fitted[gpu] = weights
                paths[gpu] = profile_with_weights(gpu, weights, Path(folder))
        for gpu, (w_c, w_m) in fitted.items():
            power = load_hardware(gpu).power
            print(f"\nrefit {gpu} on its fit rows: compute_weight {w_c:.2f}, memory_weight {w_m:.2f} "
                  f"(bundled {power.compute_weight:g}, {power.memory_weight:g})")
        again = [simulate_row(r, paths.get(r["gpu"], r["gpu"])) for r in rows]
        report("refitted weights (fit rows only), every row simulated again", rows, again)


if __name__ == "__main__":
    main()
