"""`infersim disagg`: aggregated vs disaggregated prefill/decode layouts at equal GPU count."""

from __future__ import annotations

import math
from pathlib import Path

import typer

from sim.cli.common import print_json, print_table
from sim.cli.group_flags import with_group_flags
from sim.errors import InputError
from sim.inputs.budget import MAX_TIME_S, check_layouts
from sim.inputs.config import load_config
from sim.planner.disagg import parse_pd_ratios
from sim.run.disagg_compare import compare_splits
from sim.run.invoke import load_run_workload

COLUMNS = ("layout", "gpus", "finished", "ttft_p99_s", "tpot_p99_s", "slo_met", "goodput_req_s", "goodput_per_gpu",
           "kv_transfer_p99_s")


@with_group_flags  # --prefill-* / --decode-* (sim/cli/group_flags.py)
def disagg(
    trace: str = typer.Option("AzureLLMInferenceTrace_conv", "--trace", "-t", help="trace or bundled name"),
    config: Path = typer.Option(None, "--config", "-c", help="config YAML (model, hardware, tp, policy, groups)"),
    model: str = typer.Option(None, "--model", "-m", help="model [llama-3-8b]"),
    hardware: str = typer.Option(None, "--hardware", "-H", help="profile [h100-sxm]"),
    tp: int = typer.Option(None, "--tp", help="TP per replica [1]"),
    policy: str = typer.Option("chunked", "--policy", "-p", help="continuous | chunked | radix"),
    ratios: str = typer.Option("1:1,1:2,1:3", "--ratios", help="P:D layouts to try"),
    load: float = typer.Option(1.0, "--load", help="the trace's own rate x this, PER REPLICA (load grows with "
                                                   "the cluster, so rows compare per GPU)"),
    max_requests: int = typer.Option(2000, "--max-requests", help="replay only the first N requests"),
    ttft_slo: float = typer.Option(2.0, "--ttft-slo", help="TTFT SLO, seconds"),
    tpot_slo: float = typer.Option(0.1, "--tpot-slo", help="TPOT SLO, seconds"),
    as_json: bool = typer.Option(False, "--json", help="print the rows as JSON"),
    group_knobs: dict | None = None,
) -> None:
    """Aggregated vs P:D disaggregated clusters of equal GPU count: TTFT/TPOT p99, goodput per GPU."""
    if not (math.isfinite(load) and load > 0):
        raise InputError("--load", None, f"must be a finite number > 0 (got {load})")
    for flag, limit_s in (("--ttft-slo", ttft_slo), ("--tpot-slo", tpot_slo)):
        if not (math.isfinite(limit_s) and 0 < limit_s <= MAX_TIME_S):
            raise InputError(flag, None, f"must be a number of seconds in (0, {MAX_TIME_S:g}] (got {limit_s})")
    if max_requests < 1:
        raise InputError("--max-requests", None, "must be >= 1")
    layouts = parse_pd_ratios(ratios, "--ratios")
    check_layouts(layouts, "--ratios")
    overrides = {"model": model, "hardware": hardware, "tp": tp, "policy": policy,
                 "slo": {"ttft_s": ttft_slo, "tpot_s": tpot_slo}, **(group_knobs or {})}
    base = load_config(config, overrides)

    def workload_for(n_replicas: int):
        if not math.isfinite(load * n_replicas):
            raise InputError("--load", None, f"{load:g} x {n_replicas} replicas is past any finite rate factor; "
                                             "a smaller --load")
        try:
            return load_run_workload(trace, rate_scale=load * n_replicas, max_requests=max_requests, seed=base.seed)
        except InputError as exc:  # the rate factor is --load x replicas: name this command's flag
            if exc.where != "--rate-scale":
                raise
            raise InputError("--load", None, exc.allowed.replace("a factor of", "a rate factor (--load x replicas) of")
                             ) from None

    rows = [r.row() for r in compare_splits(base, workload_for, layouts)]
    if as_json:
        print_json({"rows": rows})
        return
    print_table(f"{base.model} on {base.hardware} TP{base.tp} per replica, {policy}; load {load:g} x trace rate per "
                f"replica; SLO TTFT <= {ttft_slo} s, TPOT <= {tpot_slo} s", list(COLUMNS),
                [[_cell(row[c]) for c in COLUMNS] for row in rows])


def _cell(value) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" if isinstance(value, float) else str(value)
