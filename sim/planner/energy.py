"""Energy in a plan (issue 49): what each candidate cluster draws at the target rate, from the runs
the planner already does, and the power budget a plan may be held to (`plan --power-budget-kw`).

A row's watts come from its passing verification run (the whole workload at the target rate through
all its replicas) when it has one, else from its sizing run at the lowest passing rate at or above
target / replicas (the busiest slice, so an over-estimate of the mean). Only profiles with a `power`
section are metered (sim/inputs/power.py); rows of other profiles carry no `energy` key at all.

Counted: GPU board power at the modelled mean (steps and idle gaps), times the PUE. Not counted:
host CPUs, memory, NICs, NVSwitch / network switches and storage: no profile has a measurement of
them, so they are left out rather than guessed; lower the budget by their share to include them."""

from __future__ import annotations

import math
from dataclasses import dataclass

from sim.run.energy_summary import energy_summary

HOURS_PER_DAY = 24.0
COUNTED = "GPU board power at the modelled mean (steps and idle gaps) x PUE"
NOT_COUNTED = ("host CPUs and memory, NICs, NVSwitch and network switches, storage: no measured share in the "
               "profiles, so not counted (lower the budget by their share to include them)")


def run_energy(result, frame) -> dict | None:
    """The compact energy record of one run (a sizing point or a verification run), None when the run
    was not metered (a profile without a power section, a layout not metered yet)."""
    energy = energy_summary(result, frame)
    if energy is None:
        return None
    return {key: energy[key] for key in ("gpus", "mean_power_w_per_gpu", "energy_j", "j_per_output_token")}


def row_energy(row: dict, target_qps: float, mean_output_tokens: float, pue: float, usd_per_kwh: float) -> dict | None:
    """plan.json row `energy`: mean watts per GPU, the cluster's kW at the target rate (GPUs, and at the
    PUE), J per output token and tokens per joule at the target rate, kWh and $ of electricity per day
    next to $ of GPU-hours per day; None when no run of the row was metered."""
    source, record = _energy_source(row, target_qps)
    if record is None:
        return None
    gpu_w = record["mean_power_w_per_gpu"] * row["gpus"]
    output_tok_s = target_qps * mean_output_tokens
    facility_kw = gpu_w * pue / 1e3
    j_per_token = gpu_w / output_tok_s if output_tok_s else None
    return {
        "from": source, "mean_power_w_per_gpu": record["mean_power_w_per_gpu"],
        "gpu_kw": gpu_w / 1e3, "facility_kw": facility_kw,
        "j_per_output_token": j_per_token, "output_tokens_per_j": 1 / j_per_token if j_per_token else None,
        "kwh_per_day": facility_kw * HOURS_PER_DAY,
        "electricity_usd_per_day": facility_kw * HOURS_PER_DAY * usd_per_kwh,
        "gpu_usd_per_day": row["cost_per_hour_usd"] * HOURS_PER_DAY,
    }


def _energy_source(row: dict, target_qps: float) -> tuple[str, dict | None]:
    """(where the watts come from, its energy record): the passing verification run at the row's
    replicas, else the sizing point at the lowest passing rate not below target / replicas."""
    run = next((r for r in row.get("verification") or [] if r["passes"] and r["replicas"] == row["replicas"]), None)
    if run is not None and run.get("energy"):
        return f"verification run: whole workload, {row['replicas']} replicas at {target_qps:g} req/s", run["energy"]
    per_replica = target_qps / row["replicas"]
    points = [p for p in row["search_points"] if p["passes"] and p.get("energy") and p["rate_qps"] >= per_replica]
    point = min(points, key=lambda p: p["rate_qps"], default=None)
    if point is None:
        return "", None
    return (f"sizing run at {point['rate_qps']:.3g} req/s per replica (busiest slice; an over-estimate of the "
            f"{per_replica:.3g} req/s each replica carries on average)"), point["energy"]


def energy_section(rows: list[dict], pue: float, usd_per_kwh: float, budget_kw: float | None) -> dict | None:
    """plan.json `energy`: the prices used, what is and is not counted, and the budget; None when no
    row was metered and no budget was asked for (plans without energy keep their old keys)."""
    if budget_kw is None and not any(r.get("energy") for r in rows):
        return None
    return {"pue": pue, "usd_per_kwh": usd_per_kwh, "counted": COUNTED, "not_counted": NOT_COUNTED,
            "power_budget_kw": budget_kw}


def within_budget(row: dict, budget_kw: float | None) -> bool:
    """Whether the row's facility kW fits the budget (always, with no budget; never, unmetered)."""
    if budget_kw is None:
        return True
    energy = row.get("energy")
    return energy is not None and energy["facility_kw"] <= budget_kw


MAX_POWER_BUDGET_KW = 5_000_000.0  # 5 GW: past the largest AI campuses announced (1-5 GW); a budget in W reads 1000x


def check_power_budget(budget_kw: float | None) -> None:
    """InputError for a budget that is not a positive, finite number of kilowatts."""
    from sim.errors import InputError

    if budget_kw is not None and not (math.isfinite(budget_kw) and 0 < budget_kw <= MAX_POWER_BUDGET_KW):
        raise InputError("--power-budget-kw", None,
                         f"kilowatts above 0 and at most {MAX_POWER_BUDGET_KW:,.0f} (got {budget_kw:g}; a budget in "
                         "watts is 1,000 times too big)")


def budget_line(rows: list[dict], budget_kw: float) -> str:
    """Why nothing was recommended under the budget: the lowest-power verified cluster and its kW."""
    metered = [r for r in rows if r.get("verified") and r.get("energy")]
    if not metered:
        return (f"no verified cluster met the SLOs with a metered power figure, so none can be held to "
                f"{budget_kw:g} kW (profiles without a power section are not metered)")
    low = min(metered, key=lambda r: r["energy"]["facility_kw"])
    return (f"no cluster meets the SLOs within {budget_kw:g} kW: the lowest-power verified one, {low['replicas']} x "
            f"{low['hardware']} tp{low['tp']} {low['policy']}, needs {low['energy']['facility_kw']:.3g} kW")


def add_row_energy(rows: list[dict], target_qps: float, mean_output_tokens: float,
                   electricity: tuple[float, float]) -> None:
    """Set each metered row's `energy` (sim/planner/energy.row_energy); unmetered rows get no key."""
    usd_per_kwh, pue = electricity
    for row in rows:
        energy = row_energy(row, target_qps, mean_output_tokens, pue, usd_per_kwh)
        if energy is not None:
            row["energy"] = energy


def plan_energy_keys(rows: list[dict], recommended: dict | None, electricity: tuple[float, float],
                     budget_kw: float | None, pareto_points: list[dict]) -> dict:
    """plan.json's top-level energy keys: `energy` (prices, what is counted, the budget's verdict) and
    `pareto_per_joule`; {} when nothing was metered and no budget asked for (older plans' keys kept)."""
    from sim.planner.knobs import pareto_frontier

    usd_per_kwh, pue = electricity
    section = energy_section(rows, pue, usd_per_kwh, budget_kw)
    if section is None:
        return {}
    if budget_kw is not None:
        for row in rows:
            if row.get("energy"):
                row["energy"]["within_budget"] = within_budget(row, budget_kw)
        section["budget"] = budget_verdict(rows, recommended, budget_kw)
    joules = [p for p in pareto_points if "tok_per_joule" in p]
    return {"energy": section, "pareto_per_joule": pareto_frontier(joules, "tok_per_joule") if joules else []}


def budget_verdict(rows: list[dict], recommended: dict | None, budget_kw: float) -> dict:
    """What the budget changed: the cheapest verified cluster without it, the recommendation within it,
    the trade-off between them (extra $/hour for kW saved), or the line saying none fits."""
    unconstrained = next((r for r in rows if r.get("verified")), None)
    verdict = {"budget_kw": budget_kw, "without_budget": None if unconstrained is None else _brief(unconstrained),
               "within_budget": None if recommended is None else _brief(recommended),
               "n_over_budget": sum(1 for r in rows if r.get("energy") and not r["energy"]["within_budget"])}
    if recommended is None:
        verdict["line"] = budget_line(rows, budget_kw)
    elif unconstrained is not None and _brief(unconstrained) != _brief(recommended):
        a, b = _brief(unconstrained), _brief(recommended)
        saved = "" if a["facility_kw"] is None else f" for {b['facility_kw'] - a['facility_kw']:+.3g} kW"
        verdict["line"] = (f"within {budget_kw:g} kW: {b['cluster']} at ${b['cost_per_hour_usd']:.2f}/hour, "
                           f"{b['facility_kw']:.3g} kW, instead of {a['cluster']} at "
                           f"${a['cost_per_hour_usd']:.2f}/hour, "
                           f"{_kw(a['facility_kw'])}: {b['cost_per_hour_usd'] - a['cost_per_hour_usd']:+.2f} $/hour"
                           f"{saved}")
    else:
        verdict["line"] = f"the cheapest verified cluster fits {budget_kw:g} kW: the budget changes nothing"
    return verdict


def _brief(row: dict) -> dict:
    energy = row.get("energy") or {}
    return {"cluster": f"{row['replicas']} x {row['hardware']} tp{row['tp']} {row['policy']}", "gpus": row["gpus"],
            "cost_per_hour_usd": row["cost_per_hour_usd"], "facility_kw": energy.get("facility_kw")}


def _kw(value: float | None) -> str:
    return "power not metered" if value is None else f"{value:.3g} kW"


@dataclass(frozen=True)
class PlanPower:
    """What a plan needs to meter its rows: the target rate and mean output tokens (J per token at
    the target), ($ per kWh, PUE), and the budget in facility kW (None: no budget)."""

    target_qps: float
    mean_output_tokens: float
    electricity: tuple[float, float]
    budget_kw: float | None = None

    def recost(self, row: dict) -> dict:
        """{"energy": ...} for a row just verified (merged into it by the caller), {} when unmetered."""
        usd_per_kwh, pue = self.electricity
        energy = row_energy(row, self.target_qps, self.mean_output_tokens, pue, usd_per_kwh)
        return {} if energy is None else {"energy": energy}

    def fits(self, row: dict) -> bool:
        return within_budget(row, self.budget_kw)
