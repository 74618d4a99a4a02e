"""How `infersim plan` prints a plan: the candidates, the recommendation and what it rests on, its
launch command, the per-hardware verified table, the P:D comparison, the knob search and the Pareto
frontier, and what was left out and why."""

from __future__ import annotations

from pathlib import Path

from rich import box
from rich.table import Table

from sim.cli.common import console
from sim.cli.plan_energy import energy_columns, joule_cells, print_plan_energy
from sim.run.human_units import ms_text


def print_plan(result: dict, top: int) -> None:
    """The cheapest `top` candidates, the verification, the recommendation and its launch command,
    the knob search's best settings and Pareto frontier, and what was left out and why."""
    from sim.inputs.slo import PlanSLO, SloLimit, describe_slo

    slo = result["slo"]
    limits = describe_slo(PlanSLO(tuple(SloLimit(k.split("_p")[0], int(k.split("_p")[1]), v)
                                        for k, v in slo["limits_s"].items()), slo["goodput_min"]))
    shape = result["workload_shape"]
    head = (f"{result['model']} on {Path(result['workload']).name} | target {result['target_qps']:g} req/s | {limits} "
            f"| peak/mean {shape['slice']['peak_to_mean']:.2f} (sizing slice), "
            f"{_fmt(shape['peak_to_mean_60s_at_target'])} (1-min windows at target)")
    with_knobs = any(_engine_knobs(r) for r in result["candidates"])
    energy_names, energy_cells = energy_columns(result["candidates"][:top])
    rows = [[i + 1, r["hardware"], _tp(r), r["policy"]] + ([_knobs(_engine_knobs(r))] if with_knobs else []) +
            [f"{r['max_qps_per_replica']:.3g}", r["replicas"], _gpus(r), f"{r['cost_per_hour_usd']:.2f}",
             _money(r.get("usd_per_m_output_tokens")), _money(r.get("usd_per_m_total_tokens")),
             *energy_cells[i], r["binding_slo"], _verified(r)] for i, r in enumerate(result["candidates"][:top])]
    columns = ("#", "hardware", "tp", "policy") + (("knobs",) if with_knobs else ()) + (
        "qps/rep", "reps", "GPUs (nodes)", "$/hour", "$/M out", "$/M tok", *energy_names, "binds", "verified")
    _print_rows(head, columns, rows, left=("hardware", "policy", "knobs", "binds", "verified"))
    print_basis(result)
    best = result["recommended"]
    budget = (result.get("energy") or {}).get("budget")
    if best is None and budget is not None:
        console.print(f"[bold red]no recommendation[/bold red]: {budget['line']}", soft_wrap=True)
    elif best is None:
        console.print("[bold red]no recommendation[/bold red]: no verified cluster met the SLOs on the whole workload "
                      "(raise --max-verify-runs, relax the SLOs or add hardware)")
    else:
        run = best.get("verified_run")
        check = "" if run is None else (
            f"; whole workload at {result['target_qps']:g} req/s: " + ", ".join(
                f"P99 {k.upper()} {ms_text(v)}" for k, v in run["p99_ms"].items()) +
            f", {run['within_all_slos']:.1%} of requests within all SLOs")
        console.print(f"[bold]recommended[/bold]: {best['replicas']} x {best['hardware']} {_tp(best, 'tp')} "
                      f"{best['policy']}{_knobs(_engine_knobs(best), ' ')} = {best['gpus']} GPUs, "
                      f"${best['cost_per_hour_usd']:.2f}/hour{check}")
        if "uncertainty" in best:
            from sim.planner.band import band_line

            console.print(band_line(best["uncertainty"]))
        print_trust(result.get("trust"), best)
        print_launch(result["launch"])
    print_plan_energy(result)
    print_verified_per_hardware(result)
    if result.get("disaggregated"):
        print_disaggregated(result["disaggregated"], result["slo"])
    if result.get("best_per_hardware_tp"):
        _print_rows("best engine knobs per hardware x TP", ("hardware", "tp", "policy", "knobs", "qps/rep"),
                    [[r["hardware"], r["tp"], r["policy"], _knobs(r["knobs"]), f"{r['max_qps_per_replica']:.3g}"]
                     for r in result["best_per_hardware_tp"]], left=("hardware", "policy", "knobs"))
    if result["pareto"]:
        joule_names, joules = joule_cells(result["pareto"][:top])
        _print_rows("Pareto frontier (passing points): output tok/s per GPU vs tok/s per user",
                    ("hardware", "tp", "policy", "knobs", "req/s/rep", "tok/s/GPU", "tok/s/user", *joule_names),
                    [[p["hardware"], p["tp"], p["policy"], _knobs(p["knobs"]), f"{p['rate_qps_per_replica']:.3g}",
                      f"{p['tok_s_per_gpu']:.0f}", f"{p['tok_s_per_user']:.1f}", *joules[i]]
                     for i, p in enumerate(result["pareto"][:top])], left=("hardware", "policy", "knobs"))
    for row in result["infeasible"]:
        console.print(f"infeasible: {row['hardware']} tp{row['tp']} {row['policy']}{_knobs(row['knobs'], ' ')}: "
                      f"{row['reason']}")
    policies_of: dict[tuple, list[str]] = {}
    for row in result["skipped"]:
        policies_of.setdefault((row["hardware"], row["tp"], row["reason"]), []).append(row["policy"])
    for (hardware, tp, reason), policies in policies_of.items():
        console.print(f"skipped: {hardware} tp{tp} {','.join(dict.fromkeys(policies))}: {reason}", style="dim",
                      soft_wrap=True)


def print_basis(result: dict) -> None:
    """What every candidate was simulated with (weights, engine) and what the screen left out."""
    weights = result.get("weight_dtype")
    if weights is not None:
        console.print(f"weights: {weights['described']} (--weight-dtype overrides)", soft_wrap=True)
    engine = (result.get("config") or {}).get("engine")
    if engine is not None:
        from sim.inputs.engines.preset import load_engine

        preset = load_engine(engine)
        console.print(f"engine: {preset.name} ({preset.engine} {preset.version}): its knobs and CPU cost in every "
                      "candidate (--engine chooses another)", soft_wrap=True)
    screen = result.get("screen")
    if screen and screen["n_dropped"]:
        best = screen.get("best_dropped")
        cheapest = "" if best is None else (f"; the cheapest of them estimated ${best['cost_per_hour_usd']:.2f}/h "
                                            f"({best['candidate']})")
        console.print(f"screen: {screen['n_dropped']} of {screen['n_screened']} candidates screened out by the "
                      f"analytic estimate (not sized){cheapest}; the best plain-TP candidate of each hardware is "
                      "always sized (--screen-keep N sizes more)", soft_wrap=True)


def print_trust(trust: dict | None, best: dict) -> None:
    """Headroom, what the numbers rest on (extrapolations, validation coverage), whole-node cost."""
    headroom = best.get("headroom") or {}
    if "estimated_headroom" in headroom:
        use = headroom.get("slo_use") or {}
        used = ", ".join(f"{k} {v:.0%} of its limit" for k, v in use.items() if v is not None)
        console.print(f"  headroom: its replicas sustain {headroom['estimated_capacity_qps']:.3g} req/s on the busiest "
                      f"slice ({headroom['estimated_headroom']:+.0%} over the target, estimated)"
                      + (f"; the whole-workload run used {used}" if used else ""), soft_wrap=True)
        if headroom["estimated_headroom"] < 0:
            console.print(f"warning: negative headroom: these replicas are estimated to sustain "
                          f"{-headroom['estimated_headroom']:.0%} less than the target rate on the busiest slice; the "
                          "whole-workload run passed, but the cluster runs past its estimated capacity (add a "
                          "replica, or rerun on a longer workload before trusting it)", style="bold yellow",
                          soft_wrap=True)
    steady = steady_line(best)
    if steady:
        console.print(f"  steady state: {steady}", soft_wrap=True)
    if best.get("nodes") is not None:
        console.print(f"  whole nodes: {best['nodes']} x {best['gpus_per_node']} GPUs = "
                      f"${best['whole_node_cost_per_hour_usd']:.2f}/hour if GPUs come by the node", soft_wrap=True)
    if best.get("billing") is not None:
        console.print(f"  {billing_line(best)}", soft_wrap=True)
    if trust is None:
        return
    for reason in trust["extrapolating"]:
        console.print(f"  extrapolating: {reason}", soft_wrap=True)
    console.print(f"  validation: {trust['validation']['line']}", soft_wrap=True)


def steady_line(row: dict) -> str | None:
    """How long the runs that decided the row were, in request lifetimes (sim.run.steady_state): the
    passing search point at its capacity and the passing verification run."""
    point = next((p for p in row.get("search_points", []) if p["passes"]
                  and p["rate_qps"] == row["max_qps_per_replica"]), None)
    parts = []
    if point and point.get("steady"):
        st = point["steady"]
        parts.append(f"capacity read from {st['n_requests']:,} requests ({st['measured_lifetimes']:.2g} request "
                     f"lifetimes judged after {st['warmup_lifetimes']:.2g} of warm-up)")
    run = next((r for r in row.get("verification") or [] if r["passes"] and r["replicas"] == row["replicas"]), None)
    if run and run.get("steady_state"):
        st = run["steady_state"]
        parts.append(f"verified on {st['n_requests']:,} requests ({st['measured_lifetimes']:.2g} lifetimes judged)")
    return "; ".join(parts) or None


def billing_line(row: dict) -> str:
    """How the row's cost is billed (sim/planner/billing.py), and where that choice comes from."""
    bill = row["billing"]
    where = ("--billing" if bill["from"] == "--billing" else
             f"profile {row['hardware']}'s `billing`; --billing to change")
    if bill["unit"] == "gpu":
        return f"billing: per GPU used ({bill['billed_gpus']} billed; {where})"
    return (f"billing: per {bill['unit']} of {bill['gpus_per_unit']} GPUs, {bill['units']} x {bill['gpus_per_unit']} = "
            f"{bill['billed_gpus']} GPUs billed for {row['gpus']} used ({where})")


def _gpus(row: dict) -> str:
    return f"{row['gpus']} ({row['nodes']})" if row.get("nodes") is not None else str(row["gpus"])


def _money(value) -> str:
    return "-" if value is None else f"{value:.3g}"


def print_verified_per_hardware(result: dict) -> None:
    """The cheapest verified cluster of each hardware kind, and whether the verification walk was exact."""
    rows = result.get("verified_per_hardware")
    order = result.get("verification_order")
    if rows and len(rows) > 1:
        _print_rows("cheapest verified cluster per hardware (whole workload at the target rate)",
                    ("hardware", "tp", "policy", "knobs", "reps", "GPUs", "$/hour", "$/M out"),
                    [[r["hardware"], r["tp"], r["policy"], _knobs(r["knobs"]), r["replicas"], r["gpus"],
                      f"{r['cost_per_hour_usd']:.2f}", f"{r['usd_per_m_output_tokens']:.3g}"] for r in rows],
                    left=("hardware", "policy", "knobs"))
    if order and not order["exact"]:
        console.print(f"[bold yellow]verification stopped at --max-verified {order['max_verified']}[/bold yellow]: "
                      f"{order['n_left_with_lower_bound']} candidates could still be cheaper; raise --max-verified "
                      f"for the exact cheapest cluster")


def print_launch(launch: dict) -> None:
    """The command per replica, what it cannot express, and where the checkpoint name comes from."""
    console.print(f"launch ({launch['label']}):", soft_wrap=True)
    if launch.get("simulated"):
        console.print(f"  {launch['simulated']}", soft_wrap=True, markup=False)
    console.print(f"  {launch['replicas']} x  {launch['command']}", soft_wrap=True, markup=False)
    if launch["model_id_from"] != "--model-id":
        console.print(f"  model: {launch['model_id']} is the model spec's checkpoint (same architecture); "
                      f"--model-id names the one you serve (e.g. its -Instruct variant)", soft_wrap=True)
    for gap in launch.get("not_expressible") or []:
        console.print(f"  not expressible in {launch.get('server', launch['engine'])}: {gap}", soft_wrap=True)
    per_node = launch.get("per_node")
    if per_node:  # a replica over several nodes: what each node runs (plan.json launch.per_node; --emit k8s)
        console.print(f"  per node ({per_node['nodes']} nodes of {per_node['gpus_per_node']} GPUs): "
                      f"{per_node.get('how') or per_node.get('refused')}", soft_wrap=True, markup=False)
    for engine, line in (launch.get("layout_lines") or {}).items():
        if engine != launch["engine"]:
            console.print(f"  as {engine}:", soft_wrap=True)
            if line.get("simulated"):
                console.print(f"    {line['simulated']}", soft_wrap=True, markup=False)
            console.print(f"    {line['command']}", soft_wrap=True, markup=False)
            for gap in line["not_expressible"]:
                console.print(f"    not expressible in {engine}: {gap}", soft_wrap=True)


def print_disaggregated(section: dict, slo: dict) -> None:
    """The recommendation next to its P:D layouts: replicas, GPUs, $/hour, attainment per SLO, P99s."""
    if not section["compared"]:
        console.print(f"disaggregated: not compared: {section['reason']}")
        return
    keys = list(section["aggregated"]["attainment"])
    rows = []
    for row in [section["aggregated"], *section["splits"]]:
        layout = (str(row["replicas"]) if row["ratio"] == "aggregated" else
                  f"{row['prefill_replicas']}P + {row['decode_replicas']}D (k={row['k']})")
        met = "yes" if row["verified"] else f"FAILS at k={row['k']}"
        rows.append([row["ratio"], layout, row["gpus"], f"{row['cost_per_hour_usd']:.2f}",
                     *[f"{row['attainment'][k]:.1%}" for k in keys], ms_text(row["p99_ms"]["ttft"]),
                     ms_text(row["p99_ms"]["tpot"]), f"{row['within_all_slos']:.1%}", met])
    prefill, decode = (section.get(f"{role}_layout", f"tp{section.get(f'{role}_tp', section['tp'])}")
                       for role in ("prefill", "decode"))
    groups = prefill if prefill == decode else f"prefill {prefill}, decode {decode}"
    title = (f"aggregated vs disaggregated: {section['hardware']} {groups} {section['policy']}, "
             f"same SLOs, whole workload at the target rate")
    _print_rows(title, ("layout", "replicas", "GPUs", "$/hour", *keys, "P99 TTFT", "P99 TPOT", "within all",
                        "meets SLOs"), rows, left=("layout", "replicas", "meets SLOs"))
    console.print(f"[bold]disaggregated[/bold]: {section['verdict']}")
    for role in ("prefill", "decode"):
        for engine, line in ((section.get("launch") or {}).get(role) or {}).items():
            console.print(f"  {role} server as {engine}:", soft_wrap=True)
            if line.get("simulated"):
                console.print(f"    {line['simulated']}", soft_wrap=True, markup=False)
            console.print(f"    {line['command']}", soft_wrap=True, markup=False)


def _print_rows(title: str, columns: tuple, rows: list[list], left: tuple) -> None:
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1, 0, 0))
    for i, column in enumerate(columns):
        width = max([len(column)] + [len(str(row[i])) for row in rows])
        table.add_column(column, justify="left" if column in left else "right", min_width=width, no_wrap=True)
    for row in rows:
        table.add_row(*[str(cell) for cell in row])
    console.print(table)


def _tp(row: dict, lead: str = "") -> str:
    """The row's layout label ('dp8 x tp1 ep8') under a layout search, else its TP."""
    return row["layout"]["label"] if "layout" in row and row["layout"]["label"] != f"tp{row['tp']}" else (
        f"{lead}{row['tp']}")


def _engine_knobs(row: dict) -> dict:
    """The row's searched knobs without the layout's (shown as its layout label, `_tp`)."""
    from sim.planner.layouts import LAYOUT_KNOBS

    return {k: v for k, v in row["knobs"].items() if "layout" not in row or k not in LAYOUT_KNOBS}


def _knobs(knobs: dict, lead: str = "") -> str:
    return (lead + " ".join(f"{k}={v}" for k, v in knobs.items())) if knobs else ("" if lead else "-")


def _verified(row: dict) -> str:
    if "verified" not in row:
        bound = row.get("cost_lower_bound_usd")
        return "not run (dearer)" if bound is None else f"not run (>= ${bound:.2f})"
    if not row["verified"]:
        return f"FAILS at {row['verification'][-1]['replicas']} reps"
    tie = " tie" if row.get("tie") else ""
    if row["replicas"] == row["replicas_estimated"]:
        return "yes" + tie
    return f"yes ({row['replicas_estimated']} -> {row['replicas']}){tie}"


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.3g}"
