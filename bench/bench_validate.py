"""End-to-end validation of the engine presets against the bundled measured results (minutes of CPU).

Prints, per source, the median |error| on the cases the presets' overhead terms were fitted on
(split=fit) and on the held-out ones (split=score), the same overall, and every case the simulator
cannot express with its reason. Targets (issue 11): median |error| <= 10 % overall and <= 15 % per
source, judged on the score half.

    python bench/bench_validate.py [--max-sim-requests 3000] [--cases FILE ...]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from sim.validate.cases import load_cases
from sim.validate.report import summary_rows
from sim.validate.run import DEFAULT_MAX_SIM_REQUESTS, predict


def _pct(value) -> str:
    return "-" if value is None else f"{value:6.1%}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-sim-requests", type=int, default=DEFAULT_MAX_SIM_REQUESTS)
    parser.add_argument("--cases", nargs="*", type=Path, default=None)
    args = parser.parse_args()
    wall_start_s = time.perf_counter()
    preds = [predict(c, None, args.max_sim_requests) for c in load_cases(args.cases)]
    wall_s = time.perf_counter() - wall_start_s
    print(f"{'source':<72} {'cases':>5} {'n/a':>4} {'fit':>7} {'score':>7} {'all':>7}  target (score half)")
    for row in summary_rows(preds):
        target = 0.10 if row["source"] == "all" else 0.15
        score = row["median_abs_error_score"]
        verdict = "-" if score is None else ("met" if score <= target else f"MISSED by {score - target:.1%}")
        print(f"{row['source'][:72]:<72} {row['n_cases']:>5} {row['n_cannot_express']:>4} "
              f"{_pct(row['median_abs_error_fit'])} {_pct(score)} {_pct(row['median_abs_error'])}  "
              f"<= {target:.0%}: {verdict}")
    for p in preds:
        if p.predicted is None:
            print(f"cannot express {p.case.case_id}: {p.reason}")
    worst = sorted((p for p in preds if p.error is not None), key=lambda p: -abs(p.error))[:8]
    print("largest errors:", ", ".join(f"{p.case.case_id} {p.error:+.1%}" for p in worst))
    print(f"{len(preds)} cases in {wall_s:.0f} s wall (2 shared CPU cores: noisy)")


if __name__ == "__main__":
    main()
