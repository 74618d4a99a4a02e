"""The replays of a day plan (sim.fleet.plan): candidates screened on windows of the day
(sim.fleet.screen), then whole days with and without a failure at the peak. Each replay is a task
(`replay_row`) run through `sim.fleet.replays.Replays`, here or on Ray workers."""

from __future__ import annotations

from sim.fleet.replays import Replays, replay
from sim.fleet.screen import failure_window, meets_every_hour, window_hours, window_spec
from sim.fleet.spec import DaySpec

MAX_HEADROOM = 2
MAX_SCREENED = 8  # candidates screened at most
SCREEN_BATCH = 2  # candidates screened at once (a fixed size: the same plan on any backend)


def spec_of(spec: DaySpec, candidate: dict, failure_at_s: float | None = None, headroom: int | None = None) -> DaySpec:
    """The day spec running `candidate` (with `headroom` instead of its own, and a failure at
    `failure_at_s` of the busiest ready replica). A static fleet's headroom is reserved too."""
    auto, reserved = dict(candidate["autoscaler"]), candidate["reserved_replicas"]
    if headroom is not None:
        auto["headroom"] = headroom
        if auto["policy"]["kind"] == "static":
            reserved = auto["min_replicas"] = auto["max_replicas"] = auto["policy"]["replicas"] + headroom
        else:
            auto["max_replicas"] = max(auto["max_replicas"], auto["min_replicas"] + headroom)
    failures = {"schedule": [] if failure_at_s is None else [{"at_s": failure_at_s}],
                "on_failure": spec.fleet.failures.on_failure, "repair_s": spec.fleet.failures.repair_s}
    fleet = spec.fleet.model_validate({**spec.fleet.model_dump(exclude={"autoscaler", "failures", "pricing"}),
                                       "autoscaler": auto, "failures": failures,
                                       "pricing": {"reserved_replicas": reserved}})
    return spec.model_copy(update={"fleet": fleet})


REPLAY_KEYS = ("dollars_per_day", "gpu_hours", "slo_attainment", "worst_hour_attainment", "hours_meeting_target",
               "n_hours", "n_lost", "n_retried", "failures", "wall_time_s", "worker")


def replay_row(spec: DaySpec, base_dir, name: str, estimate: float, offset_s: float = 0.0) -> dict:
    """A replay task (here or on a Ray worker): the plan's row of it, with its hours."""
    summary = replay(spec, base_dir, offset_s)["summary"]
    return {"name": name, "estimated_dollars_per_day": estimate, **{k: summary[k] for k in REPLAY_KEYS},
            "hours": summary["hours"]}


def row_args(spec: DaySpec, candidate: dict, base_dir, failure_at_s: float | None = None, headroom: int | None = None,
             window=None) -> tuple:
    """`replay_row`'s arguments for `candidate` (with a failure at `failure_at_s` of the day and
    `headroom`; on `window` of the day, a `sim.fleet.screen.Window`, instead of the whole day)."""
    name = candidate["name"]
    if failure_at_s is not None:
        name += f", failure at {failure_at_s / 3600:.1f} h, headroom {headroom}"
    offset_s = 0.0 if window is None else window.offset_s
    day = spec_of(spec, candidate, None if failure_at_s is None else failure_at_s - offset_s, headroom)
    estimate = candidate["estimated_dollars_per_day"]
    if window is None:
        return day, base_dir, name, estimate
    return window_spec(day, window), base_dir, f"{name} [{window.label}]", estimate, offset_s


def slim(row: dict) -> dict:
    """A whole-day row without its hours (plan.json keeps only the totals)."""
    return {k: v for k, v in row.items() if k != "hours"}


def screen_candidates(plan, spec: DaySpec, base_dir, replays: Replays, windows) -> list[dict]:
    """Screen the cheapest candidates, SCREEN_BATCH at a time, until a batch has one passing every
    window; the passers in estimate order."""
    passed: list[dict] = []
    pool = plan.candidates[:MAX_SCREENED]
    for first in range(0, len(pool), SCREEN_BATCH):
        batch = pool[first:first + SCREEN_BATCH]
        rows = replays.map(replay_row, [row_args(spec, c, base_dir, window=w) for c in batch for w in windows],
                           "screened " + ", ".join(c["name"] for c in batch))
        for i, candidate in enumerate(batch):
            mine = rows[i * len(windows):(i + 1) * len(windows)]
            ok = all(meets_every_hour(row) for row in mine)
            plan.screened.append({"name": candidate["name"],
                                  "estimated_dollars_per_day": candidate["estimated_dollars_per_day"], "passed": ok,
                                  "hours": [h for row, w in zip(mine, windows) for h in window_hours(row, w)],
                                  "worker": [row["worker"] for row in mine]})  # per window
            if ok:
                passed.append(candidate)
        if passed:
            break
    return passed


def screen_failure(plan, spec: DaySpec, base_dir, replays: Replays, candidate: dict,
                    peak_s: float) -> int:
    """The least headroom (the candidate's own to MAX_HEADROOM, screened at once) whose failure
    window met the target every hour; MAX_HEADROOM when none did."""
    window = failure_window(spec, peak_s)
    headrooms = list(range(candidate["headroom"], MAX_HEADROOM + 1))
    rows = replays.map(replay_row, [row_args(spec, candidate, base_dir, peak_s, h, window) for h in headrooms],
                       f"screened {candidate['name']} with a failure at the peak, headroom "
                       f"{headrooms[0]}-{headrooms[-1]}")
    chosen = None
    for headroom, row in zip(headrooms, rows):
        ok = meets_every_hour(row)
        plan.screened_failure.append({"name": row["name"], "headroom": headroom, "passed": ok,
                                      "estimated_dollars_per_day": row["estimated_dollars_per_day"],
                                      "hours": window_hours(row, window), "worker": row["worker"]})
        if ok and chosen is None:
            chosen = headroom
    return MAX_HEADROOM if chosen is None else chosen


def verify_failure(plan, spec: DaySpec, base_dir, replays: Replays, peak_s: float, done: list[dict],
                    first_headroom: int | None) -> None:
    """The chosen candidate's whole day with a failure at the peak, from `first_headroom` (its own
    when not screened; `done`: that replay, when it ran already) up until one meets the target."""
    headroom = plan.chosen["headroom"] if first_headroom is None else first_headroom
    while headroom <= MAX_HEADROOM:
        run = done.pop(0) if done else slim(replays.map(
            replay_row, [row_args(spec, plan.chosen, base_dir, peak_s, headroom)],
            f"whole day of {plan.chosen['name']} with a failure at the peak, headroom {headroom}")[0])
        plan.with_failure.append(run)
        if run["hours_meeting_target"] == run["n_hours"]:
            plan.failure_proof_headroom = headroom
            return
        headroom += 1
