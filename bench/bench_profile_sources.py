"""Which numbers of every bundled profile are measured-fit, derived, published or guessed.

Reads each profile's `sources` (written by `python -m calibrate.defaults --write`) and prints one
row per profile: the groups of numbers in each category, and the uncertainty (1 sigma, log) the
prediction intervals draw from. Usage: python bench/bench_profile_sources.py
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim.inputs.hardware import bundled_profiles, load_hardware

CATEGORIES = ("measured-fit", "derived", "published", "guessed")


def categorize(sources: dict[str, str] | None) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {c: [] for c in CATEGORIES}
    for key, text in (sources or {"everything": "guessed: no sources"}).items():
        category = next((c for c in CATEGORIES if str(text).startswith(c)), "guessed")
        out[category].append(key)
    return out


def main() -> int:
    for name in bundled_profiles():
        hw = load_hardware(name)
        groups = categorize(hw.sources)
        print(f"{name}")
        for category in CATEGORIES:
            if groups[category]:
                print(f"  {category:12s} {', '.join(groups[category])}")
        sigma = ", ".join(f"{k} {v:.2f}" for k, v in (hw.uncertainty or {}).items())
        print(f"  {'uncertainty':12s} {sigma or 'none (0.25 everywhere)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
