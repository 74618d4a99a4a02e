"""What `simulate` prints after a run: the summary table, the prediction intervals, the load warnings."""

from __future__ import annotations

from sim.cli.common import console, print_table
from sim.cli.feature_facts import feature_facts, group_label


def print_summary(summary: dict) -> None:
    """The readable end-of-run table (times in ms)."""
    disagg = summary.get("disaggregation")
    kinds = list(dict.fromkeys(summary.get("replica_hardware") or [summary["hardware"]]))  # a mixed cluster: each kind
    cluster = (f"{summary['replicas']} x {summary['tp']} x {'+'.join(kinds)}" if not disagg else
               f"{disagg['prefill_replicas']}P x {group_label(disagg, 'prefill', '')} x {disagg['prefill_hardware']} + "
               f"{disagg['decode_replicas']}D x {group_label(disagg, 'decode', '')} x {disagg['decode_hardware']}")
    head = (f"{summary['policy']} | {summary['model']} on {cluster} | "
            f"{summary['n_finished']}/{summary['n_requests']} finished, "
            f"{summary['n_rejected']} rejected | {summary['sim_duration_s']:.1f} s simulated in "
            f"{summary['wall_time_s']:.2f} s")
    rows = []
    columns = list(summary["ttft_s"])
    for key in ("ttft_s", "tpot_s", "itl_s", "e2e_s", "queue_delay_s"):
        stats = summary[key]
        rows.append([key[:-2] + " (ms)"] + [_ms(stats[p]) for p in columns])
    print_table(head, ["latency", *columns], rows)
    facts = [
        ["throughput", f"{summary['request_throughput']:.2f} req/s, {summary['output_throughput_tok_s']:.0f} "
                       f"output tok/s, {summary['input_throughput_tok_s']:.0f} input tok/s"],
        ["KV cache", f"{summary['num_gpu_blocks']} blocks of {summary['block_size']}, mean use "
                     f"{summary['kv_utilization_mean']:.1%}, fragmentation {summary['kv_fragmentation']:.1%}"],
        ["preemptions", str(summary["preemptions"])],
        ["prefix hit rate", f"{summary['prefix_hit_rate']:.1%} ({summary['evicted_blocks']} blocks evicted)"],
    ]
    if summary.get("goodput"):
        facts.append(["goodput", f"{summary['goodput']['fraction']:.1%} of requests meet the SLOs "
                                 f"({summary['goodput']['request_throughput']:.2f} req/s)"])
    report = summary.get("slo_attainment")
    if report:
        for key, item in report["per_slo"].items():
            facts.append([f"SLO {key} <= {item['limit_ms']:g} ms",
                          f"{_ms(item['value_s'])} ms, {'met' if item['met'] else 'MISSED'}; "
                          f"{item['attainment']:.1%} of requests within"])
        met = "yes" if report["met"] else "no"
        if report.get("not_met_because"):
            met = f"no: {report['not_met_because']}" + (" (met on this run only)" if report["met_on_this_run"] else "")
        facts.append(["SLOs met", met])
    energy = summary.get("energy")
    if energy:
        facts.append(["energy", f"{energy['mean_power_w_per_gpu']:.0f} W per GPU, {_num(energy['j_per_output_token'])} "
                                f"J per output token, {_num(energy['energy_per_request_j'])} J per request, "
                                f"{energy['kwh_per_day']:.1f} kWh/day (PUE {energy['pue']:g}) = "
                                f"${energy['electricity_usd_per_day']:.2f}/day at ${energy['usd_per_kwh']:g}/kWh"])
    facts += feature_facts(summary)  # hook: sim/cli/feature_facts.py
    print_table("", ["", ""], facts)


def print_energy_notice(summary: dict, result) -> None:
    """Once per run: why summary.json has no `energy` (a profile without a power section, a layout
    whose energy is not modelled yet); never a made-up figure instead."""
    if "energy" not in summary:
        reason = result.recorder.energy_missing or "energy of disaggregated runs is not modelled yet"
        console.print(f"energy: not reported ({reason}; docs/power.md)", soft_wrap=True)


def _num(value) -> str:
    return "-" if value is None else f"{value:.3g}"


def print_load_warnings(summary: dict) -> None:
    """The overload warning and why the first requests were rejected (sim.run.load_check)."""
    from sim.run.load_check import overload_line

    line = overload_line(summary)
    if line:
        console.print(line, style="bold yellow", soft_wrap=True)
    rejected = summary.get("rejections") or {}
    if rejected.get("n"):
        console.print(f"rejected: {rejected['n']} requests; first: {rejected['first_reason']}; kinds: "
                      f"{rejected['kinds']}", soft_wrap=True)


def print_intervals(summary: dict) -> None:
    """p10-p90 bands of the perturbed replays (when --uncertainty ran) and what is extrapolated."""
    bands = summary.get("intervals")
    if bands:
        rows = [[key[:-2] + " p50/p99 (ms)"] + [f"{_ms(bands[key][s]['p10'])}-{_ms(bands[key][s]['p90'])}"
                                                 for s in ("p50", "p99")] for key in ("ttft_s", "tpot_s", "e2e_s")]
        tput = bands["request_throughput"]
        rows.append(["throughput (req/s)", f"{tput['p10']:.2f}-{tput['p90']:.2f}", ""])
        print_table(f"p10-p90 over {bands['n_replays']} perturbed replays", ["", "p50", "p99"], rows)
    for reason in summary.get("extrapolating") or []:
        console.print(f"extrapolating: {reason}")


def _ms(value) -> str:
    return "-" if value is None else f"{value * 1e3:.1f}"
