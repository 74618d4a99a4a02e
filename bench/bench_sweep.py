"""Wall time of a 4 x 4 sweep (max_num_seqs x block_size at a fixed QPS): local with 1 and 2 worker
processes, and on a local Ray cluster of 2 CPUs.

Run: `python bench/bench_sweep.py [--max-requests 400] [--qps 20] [--trace splitwise_conv]`.
Every run starts from an empty folder (nothing skipped) and writes no plots. `wall` includes worker
start-up (process spawn and imports; for Ray also starting the cluster, shown on its own row);
`sim work` sums the points' own simulation time, so `wall - sim work / workers` is the overhead.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
from sim.run.backends import LocalBackend, RayBackend
from sim.sweep.grid import expand, parse_grid
from sim.sweep.runner import run_sweep

GRID = ["max_num_seqs=32,64,128,256", "block_size=8,16,32,64"]


def timed_sweep(points, backend) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        outcome = run_sweep(points, ["max_num_seqs", "block_size"], Path(folder), backend)
        wall_s = time.perf_counter() - start
    assert outcome.n_ran == len(points)
    return wall_s, float(outcome.frame["wall_time_s"].sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-requests", type=int, default=400)
    parser.add_argument("--qps", type=float, default=20.0)
    parser.add_argument("--trace", default=None)
    args = parser.parse_args()
    points = expand({}, {"trace": args.trace, "max_requests": args.max_requests},
                    parse_grid([*GRID, f"qps={args.qps}"]))
    rows = []
    for workers in (1, 2):
        wall_s, work_s = timed_sweep(points, LocalBackend(workers))
        rows.append((f"local, {workers} worker{'s' * (workers > 1)}", wall_s, work_s))
    try:
        import ray
    except ImportError:
        ray = None
    if ray is not None:
        start = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        rows.append(("ray cluster start (2 CPUs)", time.perf_counter() - start, 0.0))
        wall_s, work_s = timed_sweep(points, RayBackend(None, 2))
        rows.append(("ray, 2 CPUs (cluster up)", wall_s, work_s))
        ray.shutdown()
    print(f"4 x 4 sweep, {len(points)} points, {args.max_requests} requests each at {args.qps:g} QPS")
    print(f"{'backend':<28} {'wall (s)':>9} {'sim work (s)':>13} {'points/s':>9}")
    for name, wall_s, work_s in rows:
        rate = f"{len(points) / wall_s:9.2f}" if work_s else f"{'':>9}"
        print(f"{name:<28} {wall_s:9.2f} {work_s:13.2f} {rate}")


if __name__ == "__main__":
    main()
