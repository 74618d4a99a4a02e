"""A day's run folder: summary.json, hours.csv, timeline.csv, replicas.csv and day.png, replaced
whole (sim.output.atomic_run_dir)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from sim.fleet.billing import summary as day_summary
from sim.fleet.facts import hardware_facts, load_facts
from sim.output import write_json, write_text
from sim.run.folder import atomic_run_dir

DAY_FILES = ("summary.json", "hours.csv", "timeline.csv", "replicas.csv", "day.png")


def prices_of(result):
    return hardware_facts(load_facts(result.spec.fleet.facts), result.cfg).price_per_gpu_h


def summarize(result) -> dict:
    return day_summary(result, prices_of(result))


def _csv(rows: list[dict]) -> str:
    out = io.StringIO()
    if rows:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return out.getvalue()


def replica_rows(result) -> list[dict]:
    return [{"index": r.index, "kind": r.kind, "launch_s": r.launch_s, "ready_s": r.ready_s, "stop_s": r.stop_s,
             "end_state": r.state} for r in result.replicas]


def write_day(result, out_dir: Path, plot: bool = True, generator=None) -> dict:
    """Write the run folder; returns the summary. `generator` (sim.fleet.daygen.DayGenerator):
    draws the offered rate on the figure."""
    return write_replay({"summary": summarize(result), "timeline": result.timeline,
                         "replicas": replica_rows(result)}, out_dir, plot, generator)


def write_replay(replay: dict, out_dir: Path, plot: bool = True, generator=None) -> dict:
    """The run folder of a replay task's result (`sim.fleet.replays.replay`, here or on a Ray
    worker); returns its summary."""
    summary, timeline = replay["summary"], replay["timeline"]
    with atomic_run_dir(out_dir, DAY_FILES) as tmp:
        write_json(tmp / "summary.json", summary)
        write_text(tmp / "hours.csv", _csv(summary["hours"]))
        names = list(timeline)
        write_text(tmp / "timeline.csv", _csv([dict(zip(names, values)) for values in zip(*timeline.values())]))
        write_text(tmp / "replicas.csv", _csv(replay["replicas"]))
        if plot:
            from sim.fleet.plots import plot_days

            rate = None
            if generator is not None:
                import numpy as np

                t_s = np.arange(0.0, summary["duration_s"], 60.0)
                rate = (t_s, generator.rate_rps(t_s))
            plot_days({"run": (summary, timeline)}, tmp / "day.png", rate,
                      f"{summary['model']} on {summary['hardware']}: a day")
    return summary
