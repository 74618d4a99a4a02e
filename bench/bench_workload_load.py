"""Load time and peak memory of the streaming trace loaders on 1M-request files.

Writes, in a temporary folder, a 1M-row canonical JSONL (multi-turn synthetic requests
with prefix hash ids, 16-token blocks) and a 1M-row Azure-style CSV, then loads each in
a fresh Python process and prints wall time and peak RSS (resource.getrusage) next to
the RSS of a process that only imported the package (the baseline). The files are made
in a child process too: Linux carries ru_maxrss across fork+exec, so the parent stays
small to keep the measuring children honest.

    python bench/bench_workload_load.py [--rows 1000000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run from a checkout without installing

_CHILD = """
import json, resource, sys, time
from sim.inputs.workload import load_workload
path, fmt = sys.argv[1], sys.argv[2]
baseline_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
trace = None if fmt == "none" else load_workload(path, fmt)
seconds = time.perf_counter() - start
arrays = [] if trace is None else [trace.arrival_s, trace.prompt_tokens, trace.output_tokens]
if trace is not None and trace.has_hash_ids:
    arrays += [trace.hash_ids_flat, trace.hash_offsets]
print(json.dumps({"seconds": seconds, "baseline_kib": baseline_kib,
                  "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "rows": 0 if trace is None else len(trace),
                  "array_bytes": sum(a.nbytes for a in arrays)}))
"""


def write_canonical(path: Path, n_rows: int) -> float:
    from sim.inputs.workload import write_canonical_jsonl
    from sim.inputs.workload.spec_models import Synthetic
    from sim.inputs.workload.synthetic.generate import generate_synthetic

    spec = Synthetic.model_validate(
        {
            "arrival": {"kind": "poisson", "rate_qps": 50.0},
            "lengths": {
                "prompt": {"kind": "lognormal", "mean": 60, "sigma": 0.8, "max": 400},
                "output": {"kind": "lognormal", "mean": 40, "sigma": 0.8, "max": 400},
            },
            "prefix": {
                "system_prompts": {
                    "n_templates": 10,
                    "tokens": {"kind": "uniform", "low": 20, "high": 100},
                },
                "multi_turn": {
                    "turns": {"kind": "uniform", "low": 1, "high": 3},
                    "think_time_s": 10,
                },
            },
            "n_requests": n_rows,
        }
    )
    trace = generate_synthetic(spec, seed=0)
    start = time.perf_counter()
    write_canonical_jsonl(trace, path)
    return time.perf_counter() - start


def write_azure(path: Path, n_rows: int) -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    gaps_100ns = rng.integers(1, 2_000_000, size=n_rows)
    stamps = np.datetime64("2024-05-10T00:00:00", "ns") + np.cumsum(gaps_100ns) * 100
    text = np.datetime_as_string(stamps, unit="ns").astype("U29")
    text = np.char.replace(np.char.ljust(text, 29), "T", " ")
    text = np.array([t[:27] for t in text.tolist()])  # 7 fractional digits, as Azure writes
    context, generated = rng.integers(1, 8000, size=n_rows), rng.integers(1, 1000, size=n_rows)
    with open(path, "w") as handle:
        handle.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
        for start in range(0, n_rows, 100_000):
            stop = start + 100_000
            lines = [
                f"{t},{c},{g}"
                for t, c, g in zip(
                    text[start:stop].tolist(),
                    context[start:stop].tolist(),
                    generated[start:stop].tolist(),
                )
            ]
            handle.write("\n".join(lines) + "\n")


def measure(path: Path | str, fmt: str) -> dict:
    output = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), fmt],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(output)


def write_files(folder: Path, n_rows: int) -> float:
    """In a child process: write both files, return the canonical writer's seconds."""
    output = subprocess.run(
        [sys.executable, __file__, "--write-files", str(folder), "--rows", str(n_rows)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return float(output)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--write-files", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    n_rows = args.rows
    if args.write_files:
        seconds = write_canonical(args.write_files / "trace.jsonl", n_rows)
        write_azure(args.write_files / "azure.csv", n_rows)
        print(seconds)
        return
    with tempfile.TemporaryDirectory() as folder:
        canonical, azure = Path(folder) / "trace.jsonl", Path(folder) / "azure.csv"
        write_seconds = write_files(Path(folder), n_rows)
        baseline = measure("-", "none")
        print(
            f"rows {n_rows:,}; canonical JSONL written in {write_seconds:.2f} s; "
            f"baseline RSS after import {baseline['peak_kib'] / 1024:.0f} MiB"
        )
        print(
            f"{'file':<28}{'MiB on disk':>12}{'load s':>9}{'peak RSS MiB':>14}"
            f"{'over baseline':>15}{'arrays MiB':>12}"
        )
        for label, path, fmt in (
            ("canonical JSONL (hash ids)", canonical, "canonical"),
            ("Azure CSV", azure, "azure"),
        ):
            result = measure(path, fmt)
            assert result["rows"] == n_rows, result
            print(
                f"{label:<28}{path.stat().st_size / 2**20:>12.1f}{result['seconds']:>9.2f}"
                f"{result['peak_kib'] / 1024:>14.0f}"
                f"{(result['peak_kib'] - result['baseline_kib']) / 1024:>15.0f}"
                f"{result['array_bytes'] / 2**20:>12.1f}"
            )


if __name__ == "__main__":
    main()
