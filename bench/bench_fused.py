"""CPU seconds of one replay through the engine, the fused core and the reference stepper, in one
process and one sitting (issue 48), with latency attribution off, on (the default), or each in turn
(`--attribution off,on`). Rows: the full bundled Splitwise conversation trace (19,366 requests) on one
llama-2-7b / h100-sxm replica, continuous (bench_simulate.py's "splitwise_conv 7B continuous"), and a
synthetic Poisson replay (ShareGPT lengths, llama-3-8b, one h100-sxm replica, 6 req/s, continuous)
of `--poisson` requests. Each cell: CPU seconds of `simulate` alone (inputs loaded before), and its
ratio to a fixed pure-Python loop timed in the same process (bench_simulate.FIXED_LOOP). The three
summaries are checked equal (1e-12 of the clock, tests/test_reference_stepper.py's rule).

    python bench/bench_fused.py [--poisson 100000] [--cores engine,fused,reference] [--rows conv,poisson]
                                [--attribution off|on|off,on] [--policy continuous|chunked]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

from bench_simulate import FIXED_LOOP, POISSON_SPEC, REPLAY_RATE_QPS  # noqa: E402
from test_reference_stepper import assert_close  # noqa: E402

from sim.inputs.config import EngineConfig  # noqa: E402
from sim.run.invoke import load_run_workload  # noqa: E402
from sim.run.reference import simulate_reference  # noqa: E402
from sim.run.simulate import simulate  # noqa: E402
from sim.run.summary import summarize  # noqa: E402


def cpu_s(run, *args) -> tuple[float, object]:
    start = time.process_time()
    result = run(*args)
    return time.process_time() - start, result


def loop_cpu_s() -> float:
    return min(cpu_s(exec, FIXED_LOOP, {})[0] for _ in range(2))


def run_core(core: str, cfg: EngineConfig, workload):
    if core == "reference":
        return simulate_reference(cfg, workload)
    return simulate(cfg, workload, core=core)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--poisson", type=int, default=100_000)
    parser.add_argument("--cores", default="engine,fused,reference")
    parser.add_argument("--rows", default="conv,poisson")
    parser.add_argument("--attribution", default="off")
    parser.add_argument("--policy", default="continuous", choices=("continuous", "chunked"))
    args = parser.parse_args()
    cores = args.cores.split(",")
    rows = []
    for attribution in args.attribution.split(","):
        on = {"off": False, "on": True}[attribution]
        if "conv" in args.rows:
            rows.append((f"splitwise_conv 7B {args.policy}, attribution {attribution}",
                         EngineConfig(model="llama-2-7b", policy=args.policy, latency_attribution=on),
                         load_run_workload("splitwise_conv")))
        if "poisson" in args.rows:
            spec = Path(tempfile.mkdtemp()) / "poisson.yaml"
            spec.write_text(POISSON_SPEC.format(rate=REPLAY_RATE_QPS, n=args.poisson))
            rows.append((f"poisson {args.poisson:,} llama-3-8b {args.policy}, attribution {attribution}",
                         EngineConfig(policy=args.policy, latency_attribution=on), load_run_workload(str(spec))))
    loop_s = loop_cpu_s()
    print(f"fixed loop: {loop_s:.2f} CPU s")
    print("| row | " + " | ".join(f"{core} CPU s (x loop)" for core in cores) + " | steps |")
    print("|---|" + "---|" * (len(cores) + 1))
    for label, cfg, workload in rows:
        cells, summaries = [], {}
        for core in cores:
            seconds, result = cpu_s(run_core, core, cfg, workload)
            cells.append(f"{seconds:.2f} ({seconds / loop_s:.1f}x)")
            print(f"  {label}, {core}: {seconds:.2f} CPU s", file=sys.stderr, flush=True)
            summaries[core] = summarize(result)
            summaries[core].pop("wall_time_s")
        first = summaries[cores[0]]
        for core in cores[1:]:
            assert_close("summary", summaries[core], first, first["sim_duration_s"])
        print(f"| {label} | " + " | ".join(cells) + f" | {first['n_steps']:,} |", flush=True)
    print(f"fixed loop after: {loop_cpu_s():.2f} CPU s")


if __name__ == "__main__":
    main()
