"""Bad input as a new user tries it: the whole corpus (tests/hostile_corpus.py ALL_CASES) judged case
by case, as a table.

Run: `python bench/bench_bad_input.py [--only PREFIX] [--json OUT]`. Starts tests/corpus_runner.py
(one process, RLIMIT_AS 4 GiB, one BLAS thread) on every case and prints, per group of cases
(malformed corpus, issue cases, numeric flags per command, the file readers per hostile class:
FIFO, /dev/zero, folder, deep nesting, repeated key, wrong type) and in total: cases, clean
one-line exit-2 errors, correct runs, tracebacks, hangs (past the case's timeout), silent
acceptances and others; then the slowest cases, and each case that is not clean or correct,
with its first line. The must-show of issue 37: 0 tracebacks, 0 silent
acceptances, 0 others; and of issue 51: 0 hangs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout
from tests.corpus_runner import VERDICTS, verdict  # noqa: E402
from tests.hostile_corpus import ALL_CASES, ISSUE_CASES, MALFORMED_CASES  # noqa: E402
from tests.reader_corpus import reader_class  # noqa: E402

LIMIT_BYTES = 4 << 30


def group_of(case, issue_ids: set[str], malformed_ids: set[str]) -> str:
    if case.id.startswith("reader-"):
        return "readers: " + reader_class(case.id)
    if case.id in malformed_ids:
        return "malformed corpus"
    if case.id in issue_ids:
        return "issue cases"
    if case.id.startswith("dest-"):  # tests/hostile_corpus.py destination_cases: every writer x every dangerous path
        return "destinations: " + case.id[len("dest-"):].split("=")[0]
    if case.id.startswith("phys"):  # tests/bounds_corpus.py: phys-KIND-FIELD-SCALE, phys51-* (issue 51)
        return "physical field: " + ("issue 51" if case.id.startswith("phys51") else case.id.split("-")[1])
    if case.id.startswith("space-"):  # search space x {10^4, 10^6 points}
        return "search space: " + case.id.split("-")[1]
    return "numeric flags: " + case.argv[0] + (f" {case.argv[1]}" if case.argv[0] in ("workload", "calibrate", "day")
                                               else "")


def run_corpus(cases) -> tuple[dict, float]:
    env = {**os.environ, **{name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}}
    with tempfile.TemporaryDirectory(prefix="bench-bad-input-") as folder:
        results, ids = Path(folder) / "results.json", Path(folder) / "ids.txt"
        ids.write_text("\n".join(c.id for c in cases))
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "tests.corpus_runner", str(results), str(LIMIT_BYTES), str(ids)],
                              cwd=ROOT, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            sys.exit(f"corpus runner failed:\n{done.stderr[-3000:]}")
        return json.loads(results.read_text())["cases"], time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run the cases whose id starts with this")
    parser.add_argument("--json", type=Path, help="also write {id: verdict} here")
    args = parser.parse_args()
    cases = [c for c in ALL_CASES if args.only is None or c.id.startswith(args.only)]
    outcomes, wall_s = run_corpus(cases)
    issue_ids, malformed_ids = {c.id for c in ISSUE_CASES}, {c.id for c in MALFORMED_CASES}
    verdicts = {c.id: verdict(c, outcomes[c.id]) for c in cases}
    groups: dict[str, Counter] = {}
    for c in cases:
        groups.setdefault(group_of(c, issue_ids, malformed_ids), Counter())[verdicts[c.id]] += 1
    groups["total"] = sum(groups.values(), Counter())
    print(f"{'group':<34} {'cases':>6} " + " ".join(f"{v:>17}" for v in VERDICTS))
    for name, counts in groups.items():
        print(f"{name:<34} {sum(counts.values()):>6} " + " ".join(f"{counts[v]:>17}" for v in VERDICTS))
    print(f"\n{len(cases)} cases in {wall_s:.0f} s; slowest: " + ", ".join(
        f"{c.id} {outcomes[c.id].get('wall_s', 0):.1f} s"
        for c in sorted(cases, key=lambda c: -outcomes[c.id].get("wall_s", 0))[:5]))
    for c in cases:
        if verdicts[c.id] not in ("clean error", "correct run"):
            got = outcomes[c.id]
            first = (got["exception"] or got["stderr"].strip() or got["stdout_tail"].strip()).splitlines()[:1]
            print(f"{verdicts[c.id]:>17}  {c.id}  exit {got['exit_code']}  expected {c.expected!r}: "
                  f"{first[0][:160] if first else ''}")
    if args.json:
        args.json.write_text(json.dumps(verdicts, indent=1))


if __name__ == "__main__":
    main()
