"""How `infersim plan` prints energy (sim/planner/energy.py): kW and J per token per candidate, the
recommendation's watts and electricity next to its GPU-hours, and what a power budget changed."""

from __future__ import annotations

from sim.cli.common import console


def energy_columns(rows: list[dict]) -> tuple[tuple[str, ...], list[list[str]]]:
    """('kW', 'J/tok') and each row's cells, or nothing when no row was metered (older tables kept)."""
    if not any(r.get("energy") for r in rows):
        return (), [[] for _ in rows]
    cells = []
    for r in rows:
        energy = r.get("energy")
        if energy is None:
            cells.append(["-", "-"])
        else:
            over = " over" if energy.get("within_budget") is False else ""
            cells.append([f"{energy['facility_kw']:.3g}{over}", f"{energy['j_per_output_token']:.3g}"])
    return ("kW", "J/tok"), cells


def print_plan_energy(result: dict) -> None:
    """The recommendation's power and electricity, and the power budget's verdict."""
    section = result.get("energy")
    if section is None:
        return
    best = result.get("recommended")
    energy = (best or {}).get("energy")
    if energy is not None:
        console.print(f"  energy: {best['gpus']} GPUs x {energy['mean_power_w_per_gpu']:.0f} W mean = "
                      f"{energy['gpu_kw']:.3g} kW, {energy['facility_kw']:.3g} kW at PUE {section['pue']:g}; "
                      f"{energy['j_per_output_token']:.3g} J per output token at the target rate; electricity "
                      f"${energy['electricity_usd_per_day']:.2f}/day at ${section['usd_per_kwh']:g}/kWh next to "
                      f"${energy['gpu_usd_per_day']:.2f}/day of GPU-hours (from the {energy['from']})", soft_wrap=True)
    budget = section.get("budget")
    if budget is not None:
        if best is not None:  # without one, the "no recommendation" line already said why
            console.print(f"[bold]power budget[/bold]: {budget['line']}", soft_wrap=True)
        console.print(f"  counted: {section['counted']}; not counted: {section['not_counted']}", soft_wrap=True)


def joule_cells(points: list[dict]) -> tuple[tuple[str, ...], list[list[str]]]:
    """('tok/J',) and each Pareto point's output tokens per joule, or nothing when none was metered."""
    if not any("tok_per_joule" in p for p in points):
        return (), [[] for _ in points]
    return ("tok/J",), [[f"{p['tok_per_joule']:.3g}" if "tok_per_joule" in p else "-"] for p in points]
