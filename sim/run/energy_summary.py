"""summary.json's `energy` section (present only when every replica's profile has a power section):
watts per GPU, joules per request and per token, kWh and electricity dollars per day at the run's rate.

Each replica draws its steps' energy (sim/engine/energy.py) and its idle watts over the rest of the
run (from t = 0 to the run's end); the facility multiplies the IT energy by the PUE."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from sim.run.weighted_percentiles import weighted_percentiles

if TYPE_CHECKING:
    from sim.run.simulate import SimResult

# Defaults of `simulate --usd-per-kwh / --pue` (docs/power.md names their sources)
DEFAULT_USD_PER_KWH = 0.08  # US industrial average retail price, EIA Electric Power Monthly (2024-2025: ~8 cents)
DEFAULT_PUE = 1.2  # a modern hyperscale / AI data centre; Uptime Institute's 2024 survey average is 1.56
SECONDS_PER_DAY = 86_400.0
J_PER_KWH = 3.6e6


MAX_USD_PER_KWH = 100.0  # above any retail price; a typo's scale (cents given as dollars x 100) is refused
MAX_PUE = 5.0


def check_electricity(usd_per_kwh: float, pue: float) -> tuple[float, float]:
    """(price, PUE) of the command line, or one InputError line."""
    from sim.errors import InputError

    if not 0 <= usd_per_kwh <= MAX_USD_PER_KWH:
        raise InputError("--usd-per-kwh", None,
                         f"a price in $ per kWh from 0 to {MAX_USD_PER_KWH:g} (got {usd_per_kwh:g})")
    if not 1 <= pue <= MAX_PUE:
        raise InputError("--pue", None, f"facility / IT power from 1 to {MAX_PUE:g} (got {pue:g})")
    return usd_per_kwh, pue


def energy_summary(result: SimResult, table, usd_per_kwh: float = DEFAULT_USD_PER_KWH,
                   pue: float = DEFAULT_PUE) -> dict | None:
    """The `energy` fields, or None when the run was not metered (`recorder.energy_missing` says why)."""
    tally = getattr(result.recorder, "energy", None)  # a reference stepper's recorder has none
    duration_s = result.sim_duration_s
    if tally is None or not duration_s:
        return None
    parts = _busy_s(result, tally)
    idle_j = sum(part.idle_w * max(duration_s - busy_s, 0.0) for part, busy_s in parts)
    total_j = tally.step_j + idle_j
    status = np.asarray(table["status"])
    finished = status == "FINISHED"
    output_tokens = float(np.asarray(table["output_tokens"])[finished].sum())
    prompt_tokens = float(np.asarray(table["prompt_tokens"])[finished].sum())
    n_finished = int(finished.sum())
    fleet_w = total_j / duration_s
    kwh_per_day = fleet_w * pue * SECONDS_PER_DAY / J_PER_KWH
    return {
        "gpus": tally.n_gpus,
        "mean_power_w_per_gpu": fleet_w / tally.n_gpus,
        "mean_power_w": fleet_w,
        "p99_power_w_per_gpu": _p99_watts(parts, duration_s),
        "energy_j": total_j,
        "step_energy_j": tally.step_j,
        "idle_energy_j": idle_j,
        "energy_per_request_j": total_j / n_finished if n_finished else None,
        "j_per_output_token": total_j / output_tokens if output_tokens else None,
        "j_per_total_token": total_j / (output_tokens + prompt_tokens) if output_tokens + prompt_tokens else None,
        # busy-time means over the steps: FLOPs / (peak x time), HBM bytes / (peak bandwidth x time)
        "compute_utilization_mean": tally.compute_s / tally.step_s if tally.step_s else None,
        "memory_utilization_mean": tally.memory_s / tally.step_s if tally.step_s else None,
        "pue": pue,
        "usd_per_kwh": usd_per_kwh,
        "kwh_per_day": kwh_per_day,
        "electricity_usd_per_day": kwh_per_day * usd_per_kwh,
    }


def _busy_s(result: SimResult, tally) -> list[tuple]:
    """(replica tally, its busy seconds): one replica's recorder holds its own; a merged cluster's
    tallies were each given their replica's busy time at the merge."""
    if len(tally.parts) == 1:
        return [(tally, result.recorder.busy_s)]
    return [(part, part.busy_s) for part in tally.parts]


def _p99_watts(parts: list[tuple], duration_s: float) -> float:
    """The watts one GPU draws or less for 99 % of the run's GPU-seconds (steps at their own watts,
    idle gaps at idle watts), to the whole watt below (the tallies keep 1 W bins)."""
    size = max(part.watts_s.shape[0] for part, _ in parts)
    seconds = np.zeros(size)
    for part, busy_s in parts:
        gpus = part.n_gpus
        seconds[: part.watts_s.shape[0]] += gpus * part.watts_s
        seconds[int(part.idle_w / gpus)] += gpus * max(duration_s - busy_s, 0.0)
    held = np.flatnonzero(seconds)
    return weighted_percentiles(held.astype(np.float64), seconds[held], (0.99,))[0]
