"""Speed and memory benchmark of whole `infersim` processes, before and after, in one sitting.

Rows (issue 12): the full bundled Splitwise conversation trace (19,366 requests) on one llama-2-7b /
h100-sxm replica with continuous, chunked and radix; Llama-2-70B TP4 chunked; a synthetic Poisson
replay (ShareGPT lengths, llama-3-8b, ONE h100-sxm replica, continuous, outputs written) at each of
`--sizes` requests (the scaling table); the same replay of `CLUSTER_REQUESTS` requests at 8x the
rate on 8 round-robin replicas, in one process and with `--workers` processes (`simulate --workers`,
after only: same output), and the largest size the same way with `--workers`; `workload sample` of
the largest size; the Splitwise conversation trace tiled to each of `--conv-sizes` requests (copies
back to back in time, same rate: issue 37's 200k / 1M replays). "before" runs the same commands from
`git archive <--before>` of this repository, "after" from this working tree. Each cell is the median
of `--repeats` processes; peak RSS is the largest of that process and its worker processes (wait4),
cpu their sum. "x loop" is a cell's best CPU seconds over the best of a fixed pure-Python loop
(`FIXED_LOOP`, its own process, run before and after the rows): a machine-independent speed. The default "before" is
main just before issue 12, which also predates issues 10, 11 and 13: "after" pays for their features
too (latency attribution, on by default, costs ~1/6 of a replay's simulation time;
`latency_attribution: false` in a --config turns it off).

    python bench/bench_simulate.py [--before 30dfb69|none] [--sizes 10000,100000,1000000]
                                   [--repeats 3] [--rows splitwise,70b,replay,cluster,sample,conv] [--workers 2]
                                   [--conv-sizes 200000,1000000]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEFORE_REF = "30dfb69"  # main before issue 12 (the hot-loop and memory work)
POISSON_SPEC = """synthetic:
  arrival: {{kind: poisson, rate_qps: {rate}}}
  lengths: {{trace: sharegpt}}
  n_requests: {n}
seed: 0
"""
REPLAY_RATE_QPS = 6.0  # just under what one llama-3-8b / h100-sxm replica serves of these lengths
CLUSTER_REPLICAS, CLUSTER_REQUESTS = 8, 100_000  # the cluster row: the replay's load per replica, 8 replicas
# the fixed yardstick (module-level, so global lookups): ~0.72 CPU s on this quiet 2-core machine (CPython 3.11)
FIXED_LOOP = "total = 0\nfor i in range(10_000_000):\n    total += i * i % 7\n"


def run_process(args: list[str], tree: Path) -> dict:
    """Run `python -m sim ARGS` from `tree`; wall seconds, its own peak RSS (MiB) and stdout."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "sim", *args], cwd=tree, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall_s = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode:
            raise SystemExit(f"failed in {tree}: {' '.join(args)}\n{err.read()[-2000:]}")
        return {"wall_s": wall_s, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_mib": usage.ru_maxrss / 1024,
                "stdout": out.read()}


def fixed_loop_cpu_s(repeats: int) -> float:
    """Best CPU seconds of `FIXED_LOOP` in a fresh interpreter, over `repeats` processes."""
    best = math.inf
    for _ in range(repeats):
        proc = subprocess.Popen([sys.executable, "-c", FIXED_LOOP])
        _, _, usage = os.wait4(proc.pid, 0)
        best = min(best, usage.ru_utime + usage.ru_stime)
    return best


def median_run(args: list[str], tree: Path, repeats: int) -> dict:
    runs = [run_process(args, tree) for _ in range(repeats)]
    wall = statistics.median(r["wall_s"] for r in runs)
    summary = json.loads(runs[0]["stdout"]) if runs[0]["stdout"].lstrip().startswith("{") else {}
    bundled = json.loads(runs[0]["stdout"].replace(str(tree), "<tree>")) if summary else {}  # bundled files' paths
    return {"wall_s": wall, "cpu_s": statistics.median(r["cpu_s"] for r in runs),
            "best_cpu_s": min(r["cpu_s"] for r in runs), "summary": _without_wall_times(bundled),
            "peak_mib": max(r["peak_mib"] for r in runs), "steps": summary.get("n_steps"),
            "sim_s": statistics.median(json.loads(r["stdout"])["wall_time_s"] for r in runs) if summary else None}


def _without_wall_times(value):
    """A --json summary without its wall-clock fields (the rest is the same for the same inputs)."""
    if isinstance(value, dict):
        return {k: _without_wall_times(v) for k, v in value.items() if "wall_time" not in k}
    if isinstance(value, list):
        return [_without_wall_times(v) for v in value]
    return value


def splitwise_args(policy: str, model: str = "llama-2-7b", tp: int = 1) -> list[str]:
    return ["simulate", "--trace", "splitwise_conv", "--model", model, "--hardware", "h100-sxm",
            "--policy", policy, "--tp", str(tp), "--replicas", "1", "--json"]


def rows_to_run(args, work: Path) -> list[tuple[str, list[str], int, bool]]:
    """(label, command args, repeats, after only) per table row."""
    rows = []
    if "splitwise" in args.rows:
        for policy in ("continuous", "chunked", "radix"):
            rows.append((f"splitwise_conv 7B {policy}", splitwise_args(policy), args.repeats, False))
    if "70b" in args.rows:
        rows.append(("splitwise_conv 70B TP4 chunked", splitwise_args("chunked", "llama-2-70b", 4), args.repeats,
                     False))
    sizes = [int(s) for s in args.sizes.split(",") if s]
    for n in sizes:
        spec = work / f"poisson_{n}.yaml"
        spec.write_text(POISSON_SPEC.format(rate=REPLAY_RATE_QPS, n=n))
        if "replay" in args.rows:
            out = work / f"out_{n}"
            rows.append((f"poisson {n:,} replay (outputs)", ["simulate", "--trace", str(spec), "--model", "llama-3-8b",
                                                            "--policy", "continuous", "--json", "--out", str(out)],
                         args.repeats if n < 1_000_000 else 1, False))
    if "conv" in args.rows:
        for n in [int(s) for s in args.conv_sizes.split(",") if s]:
            trace = tile_conv_trace(n, work / f"conv_{n}.csv")
            command = ["simulate", "--trace", str(trace), "--format", "splitwise", "--model", "llama-2-7b",
                       "--hardware", "h100-sxm", "--json"]
            rows.append((f"splitwise_conv tiled to {n:,}", command, args.repeats if n < 1_000_000 else 1, False))
    if "cluster" in args.rows:
        rows += cluster_rows(args, work, sizes)
    if "sample" in args.rows and sizes:
        spec = work / f"poisson_{max(sizes)}.yaml"
        rows.append((f"workload sample {max(sizes):,}", ["workload", "sample", str(spec), "--out",
                                                         str(work / "sample.jsonl")], 1, False))
    return rows


def cluster_rows(args, work: Path, sizes: list[int]) -> list[tuple[str, list[str], int, bool]]:
    """The replay's load per replica on 8 round-robin replicas: CLUSTER_REQUESTS in one process and
    in --workers processes; the largest size (if larger) in --workers processes."""
    rows = []
    for n in sorted({CLUSTER_REQUESTS, max(sizes, default=0)}):
        spec = work / f"poisson_cluster_{n}.yaml"
        spec.write_text(POISSON_SPEC.format(rate=REPLAY_RATE_QPS * CLUSTER_REPLICAS, n=n))
        command = ["simulate", "--trace", str(spec), "--model", "llama-3-8b", "--policy", "continuous", "--replicas",
                   str(CLUSTER_REPLICAS), "--router", "round_robin", "--json", "--out", str(work / f"out_cluster_{n}")]
        repeats = args.repeats if n < 1_000_000 else 1
        if n == CLUSTER_REQUESTS:
            rows.append((f"poisson {n:,} on {CLUSTER_REPLICAS} replicas", command, repeats, False))
        rows.append((f"poisson {n:,} on {CLUSTER_REPLICAS} replicas, {args.workers} workers",
                     [*command, "--workers", str(args.workers)], repeats, True))
    return rows


def tile_conv_trace(n_requests: int, path: Path) -> Path:
    """The bundled Splitwise conversation trace repeated back to back until `n_requests` rows (each
    copy starts one mean inter-arrival gap after the previous copy's last arrival), as a CSV."""
    lines = (ROOT / "workloads" / "splitwise_conv.csv").read_text().splitlines()
    rows = [line.split(",") for line in lines[1:]]
    arrivals_s = [float(r[0]) for r in rows]
    period_s = arrivals_s[-1] - arrivals_s[0] + (arrivals_s[-1] - arrivals_s[0]) / (len(rows) - 1)
    out = [lines[0]]
    for i in range(n_requests):
        copy, row = divmod(i, len(rows))
        out.append(f"{arrivals_s[row] + copy * period_s!r},{rows[row][1]},{rows[row][2]}")
    path.write_text("\n".join(out) + "\n")
    return path


def export_tree(ref: str, into: Path) -> Path:
    """The repository at `ref`, as files (git archive), for the "before" column."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", ref], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def fmt(cell: dict | None, loop_s: float) -> str:
    if cell is None:
        return f"{'-':>8} {'-':>8} {'-':>8} {'-':>7} {'-':>6}"
    sim = f"{cell['sim_s']:.2f}" if cell["sim_s"] is not None else "-"
    return (f"{cell['wall_s']:>8.2f} {cell['cpu_s']:>8.2f} {sim:>8} {cell['peak_mib']:>7.0f} "
            f"{cell['best_cpu_s'] / loop_s:>6.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=BEFORE_REF, help="git ref for the 'before' column, or 'none'")
    parser.add_argument("--sizes", default="10000,100000,1000000", help="synthetic replay sizes (scaling table)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rows", default="splitwise,70b,replay,cluster,sample,conv")
    parser.add_argument("--conv-sizes", default="200000,1000000", help="Splitwise conversation trace tiled to these")
    parser.add_argument("--workers", type=int, default=min(os.cpu_count() or 1, CLUSTER_REPLICAS),
                        help="processes for the cluster rows' --workers runs [this machine's cores, at most 8]")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_simulate.") as tmp:
        work = Path(tmp)
        trees = {"after": ROOT}
        if args.before != "none":
            trees = {"before": export_tree(args.before, work / "before"), "after": ROOT}
        loop_s, n_loops = fixed_loop_cpu_s(args.repeats), args.repeats
        results = []
        for label, command, repeats, after_only in rows_to_run(args, work):
            cells = {name: median_run(command, tree, repeats) for name, tree in trees.items()
                     if name == "after" or not after_only}
            results.append((label, cells))
            print(f"  {label}: " + ", ".join(f"{k} {v['wall_s']:.2f} s ({v['cpu_s']:.2f} cpu) / {v['peak_mib']:.0f} MiB"
                                            for k, v in cells.items()), file=sys.stderr, flush=True)
        loop_s, n_loops = min(loop_s, fixed_loop_cpu_s(args.repeats)), n_loops + args.repeats
    print(f"before = git {args.before}, after = working tree; median of {args.repeats} processes (1M rows: 1); "
          f"wall = whole process, cpu = its user+system CPU seconds (steadier on a shared machine), sim = "
          f"simulation wall only (summary wall_time_s), RSS = peak MiB of the process or its largest worker; "
          f"--workers rows run after only (the flag is new); x loop = best cpu / best fixed-loop cpu "
          f"({loop_s:.3f} s, best of {n_loops} processes, before and after the rows); "
          f"same = before's and after's --json summaries equal but for wall-time fields")
    print(f"{'row':<44} {'before wall':>11} {'cpu':>8} {'sim':>8} {'RSS':>7} {'x loop':>6} | {'after wall':>10} "
          f"{'cpu':>8} {'sim':>8} {'RSS':>7} {'x loop':>6} {'wall x':>7} {'cpu x':>6} {'same':>5}")
    for label, cells in results:
        before, after = cells.get("before"), cells["after"]
        wall_x = f"{before['wall_s'] / after['wall_s']:.2f}" if before else "-"
        cpu_x = f"{before['cpu_s'] / after['cpu_s']:.2f}" if before else "-"
        same = ("yes" if before["summary"] == after["summary"] else "NO") if before else "-"
        print(f"{label:<44} {fmt(before, loop_s):>44} | {fmt(after, loop_s):>43} {wall_x:>7} {cpu_x:>6} {same:>5}")
    _ratios(results)


def _ratios(results) -> None:
    """The issue's relative targets, from the 'after' column (process CPU seconds)."""
    wall = {label: cells["after"]["cpu_s"] for label, cells in results}  # CPU: steadier than wall when shared
    base = wall.get("splitwise_conv 7B continuous")
    if base:
        for label in ("splitwise_conv 7B chunked", "splitwise_conv 7B radix", "splitwise_conv 70B TP4 chunked"):
            if label in wall:
                print(f"{label} / 7B continuous (cpu): {wall[label] / base:.2f}")
    if "splitwise_conv 70B TP4 chunked" in wall and "splitwise_conv 7B chunked" in wall:
        ratio = wall["splitwise_conv 70B TP4 chunked"] / wall["splitwise_conv 7B chunked"]
        print(f"70B TP4 chunked / 7B chunked (cpu): {ratio:.2f}")


if __name__ == "__main__":
    main()
